#include "tokenizer/utf8.hpp"

namespace moe::tok {

size_t find_invalid_utf8(std::string_view s) {
    const auto *p = reinterpret_cast<const uint8_t *>(s.data());
    const size_t n = s.size();
    size_t i = 0;
    while (i < n) {
        const uint8_t b = p[i];
        if (b < 0x80) {
            ++i;
            continue;
        }
        size_t len = 0;
        uint32_t cp = 0, min = 0;
        if ((b & 0xE0) == 0xC0) len = 2, cp = b & 0x1F, min = 0x80;
        else if ((b & 0xF0) == 0xE0) len = 3, cp = b & 0x0F, min = 0x800;
        else if ((b & 0xF8) == 0xF0) len = 4, cp = b & 0x07, min = 0x10000;
        else return i;
        if (n - i < len) return i;
        for (size_t k = 1; k < len; ++k) {
            if ((p[i + k] & 0xC0) != 0x80) return i;
            cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
        i += len;
    }
    return std::string_view::npos;
}

uint32_t decode_utf8(std::string_view s, size_t &pos) {
    const auto *p = reinterpret_cast<const uint8_t *>(s.data());
    const uint8_t b = p[pos];
    size_t len = utf8_char_len(b);
    if (len > s.size() - pos) len = 1;
    uint32_t cp = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (p[pos + k] & 0x3F);
    pos += len;
    return cp;
}

void append_utf8(std::string &out, uint32_t cp) {
    if (cp < 0x80) {
        out += char(cp);
    } else if (cp < 0x800) {
        out += char(0xC0 | (cp >> 6));
        out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += char(0xE0 | (cp >> 12));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    } else {
        out += char(0xF0 | (cp >> 18));
        out += char(0x80 | ((cp >> 12) & 0x3F));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    }
}

}  // namespace moe::tok
