// Minimal UTF-8 helpers for the tokenizer: validation (text from callers and
// token texts from files are untrusted), character lengths and encoding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace moe::tok {

// Length of the character starting with this lead byte (1 for stray bytes).
inline size_t utf8_char_len(uint8_t lead) {
    if (lead < 0x80) return 1;
    if ((lead & 0xE0) == 0xC0) return 2;
    if ((lead & 0xF0) == 0xE0) return 3;
    if ((lead & 0xF8) == 0xF0) return 4;
    return 1;
}

// Offset of the first byte that is not part of well-formed UTF-8 (overlong
// forms, surrogates and code points above U+10FFFF are rejected), or npos.
size_t find_invalid_utf8(std::string_view s);
inline bool is_valid_utf8(std::string_view s) { return find_invalid_utf8(s) == std::string_view::npos; }

// Decodes the character at s[pos] (which must be valid UTF-8); advances pos.
uint32_t decode_utf8(std::string_view s, size_t &pos);

void append_utf8(std::string &out, uint32_t cp);

}  // namespace moe::tok
