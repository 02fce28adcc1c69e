#include "tokenizer/byte_unicode.hpp"

#include <array>
#include <string>

#include "tokenizer/utf8.hpp"

namespace moe::tok {
namespace {

bool stands_for_itself(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

struct Tables {
    std::array<std::string, 256> utf8;
    std::array<int16_t, 512> byte_of;  // every stand-in is below U+0200
    Tables() {
        byte_of.fill(-1);
        uint32_t next = 256;
        for (int b = 0; b < 256; ++b) {
            const uint32_t cp = stands_for_itself(b) ? uint32_t(b) : next++;
            append_utf8(utf8[size_t(b)], cp);
            byte_of[cp] = int16_t(b);
        }
    }
};

const Tables &tables() {
    static const Tables t;
    return t;
}

}  // namespace

std::string_view byte_to_unicode(uint8_t b) { return tables().utf8[b]; }

int unicode_to_byte(uint32_t cp) { return cp < 512 ? tables().byte_of[cp] : -1; }

}  // namespace moe::tok
