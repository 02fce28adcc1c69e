#include "tokenizer/token_piece.hpp"

#include "tokenizer/byte_unicode.hpp"
#include "tokenizer/utf8.hpp"

namespace moe::tok {
namespace {

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

// "<0xXX>" -> the byte, or -1.
int byte_token_value(std::string_view t) {
    if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
    const int hi = hex_digit(t[3]), lo = hex_digit(t[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// Byte-level text back to bytes; characters outside the byte alphabet (and
// text that is not UTF-8) are kept as they are.
void append_byte_level(std::string_view t, std::string &out) {
    if (!is_valid_utf8(t)) {
        out += t;
        return;
    }
    for (size_t pos = 0; pos < t.size();) {
        const size_t start = pos;
        const int b = unicode_to_byte(decode_utf8(t, pos));
        if (b >= 0) out += char(b);
        else out += t.substr(start, pos - start);
    }
}

void append_spm_text(std::string_view t, std::string &out) {
    for (size_t pos = 0; pos < t.size();) {
        if (t.substr(pos, 3) == "\xE2\x96\x81") {
            out += ' ';
            pos += 3;
        } else {
            out += t[pos++];
        }
    }
}

}  // namespace

void append_token_bytes(const Vocab &vocab, int32_t id, std::string &out) {
    const std::string_view t = vocab.text(id);
    switch (vocab.type(id)) {
    case TokenType::control:
    case TokenType::user_defined:
    case TokenType::unknown:
        out += t;
        return;
    case TokenType::byte:
        if (const int b = byte_token_value(t); b >= 0) {
            out += char(b);
            return;
        }
        break;
    default:
        break;
    }
    if (vocab.kind() == VocabKind::bpe) append_byte_level(t, out);
    else append_spm_text(t, out);
}

}  // namespace moe::tok
