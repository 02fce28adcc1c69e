#include "tokenizer/spm.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace moe::tok {
namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581

}  // namespace

void SpmTokenizer::tokenize(std::string_view text, bool space_prefix, std::vector<int32_t> &out,
                            SpmScratch &s) const {
    s.escaped.clear();
    if (space_prefix) s.escaped += kSpaceMark;
    for (char c : text) {
        if (c == ' ') s.escaped += kSpaceMark;
        else s.escaped += c;
    }
    const std::string_view esc = s.escaped;
    if (esc.empty()) return;

    // Symbols carry no id: a pair may merge when its text is a token, highest score first.
    merge_symbols(
        esc, s.merge, [](std::string_view) { return -1; },
        [&](const MergeSymbol &l, const MergeSymbol &r, double &cost, int32_t &) {
            const int32_t id = vocab_.find(esc.substr(l.begin, l.len + r.len));
            if (id < 0) return false;
            cost = -double(vocab_.score(id));
            return true;
        });

    for (int32_t i = 0; i >= 0; i = s.merge.symbols[size_t(i)].next) {
        const MergeSymbol &sym = s.merge.symbols[size_t(i)];
        const std::string_view piece = esc.substr(sym.begin, sym.len);
        // Merged symbols are tokens by construction; only single characters can miss.
        const int32_t id = vocab_.find(piece);
        if (id >= 0) out.push_back(id);
        else emit_bytes(piece, out);
    }
}

void SpmTokenizer::emit_bytes(std::string_view bytes, std::vector<int32_t> &out) const {
    static const char hex[] = "0123456789ABCDEF";
    for (char c : bytes) {
        const auto b = static_cast<uint8_t>(c);
        const char name[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
        int32_t id = vocab_.find(std::string_view(name, 6));
        if (id < 0) id = vocab_.find(std::string_view(&c, 1));
        if (id < 0) id = vocab_.unk();
        if (id < 0)
            fail(Status::bad_format, "the vocabulary has no token for byte 0x%02X (no <0x%02X>, no unknown token)", b, b);
        out.push_back(id);
    }
}

}  // namespace moe::tok
