#include "tokenizer/spm.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "tokenizer/utf8.hpp"

namespace moe::tok {
namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581

// Heap order: the highest score on top, then the leftmost pair.
bool comes_after(const SpmScratch::Pair &a, const SpmScratch::Pair &b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
}

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

    s.symbols.clear();
    for (size_t pos = 0; pos < esc.size();) {
        const size_t len = std::min(utf8_char_len(static_cast<uint8_t>(esc[pos])), esc.size() - pos);
        const int32_t n = int32_t(s.symbols.size());
        s.symbols.push_back({uint32_t(pos), uint32_t(len), n - 1, n + 1});
        pos += len;
    }
    s.symbols.back().next = -1;

    s.queue.clear();
    for (int32_t i = 0; i + 1 < int32_t(s.symbols.size()); ++i) queue_pair(i, s);
    while (!s.queue.empty()) {
        std::pop_heap(s.queue.begin(), s.queue.end(), comes_after);
        const SpmScratch::Pair p = s.queue.back();
        s.queue.pop_back();
        SpmScratch::Symbol &l = s.symbols[size_t(p.left)];
        SpmScratch::Symbol &r = s.symbols[size_t(p.right)];
        if (l.len == 0 || r.len == 0 || l.len + r.len != p.len) continue;  // stale
        l.len += r.len;
        l.next = r.next;
        if (r.next >= 0) s.symbols[size_t(r.next)].prev = p.left;
        r.len = 0;
        queue_pair(l.prev, s);
        queue_pair(p.left, s);
    }

    for (int32_t i = 0; i >= 0; i = s.symbols[size_t(i)].next) {
        const SpmScratch::Symbol &sym = s.symbols[size_t(i)];
        const std::string_view piece = esc.substr(sym.begin, sym.len);
        // Merged symbols are tokens by construction; only single characters can miss.
        const int32_t id = vocab_.find(piece);
        if (id >= 0) out.push_back(id);
        else emit_bytes(piece, out);
    }
}

void SpmTokenizer::queue_pair(int32_t left, SpmScratch &s) const {
    if (left < 0) return;
    const SpmScratch::Symbol &l = s.symbols[size_t(left)];
    if (l.next < 0) return;
    const SpmScratch::Symbol &r = s.symbols[size_t(l.next)];
    const int32_t id = vocab_.find(std::string_view(s.escaped).substr(l.begin, l.len + r.len));
    if (id < 0) return;
    s.queue.push_back({vocab_.score(id), left, l.next, l.len + r.len});
    std::push_heap(s.queue.begin(), s.queue.end(), comes_after);
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
