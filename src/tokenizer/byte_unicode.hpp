// The GPT-2 byte-level alphabet: every byte has a printable stand-in code
// point (printable Latin-1 bytes stand for themselves, the others map to
// U+0100 upwards in byte order), so byte-level BPE vocabularies are text.
#pragma once

#include <cstdint>
#include <string_view>

namespace moe::tok {

// UTF-8 of the stand-in for byte b (1 or 2 bytes).
std::string_view byte_to_unicode(uint8_t b);
// The byte a stand-in code point represents, or -1 when cp is not one.
int unicode_to_byte(uint32_t cp);

}  // namespace moe::tok
