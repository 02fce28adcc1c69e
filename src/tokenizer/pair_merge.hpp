// Priority merging of adjacent symbols, the core both BPE flavours share:
// the text is split into UTF-8 characters, every adjacent pair that may merge
// is queued with a cost, and the cheapest pair (leftmost on ties) is merged
// until none is left. A merge re-queues the pairs on both sides of the new
// symbol; queued pairs whose sides changed since are skipped when popped.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/utf8.hpp"

namespace moe::tok {

struct MergeSymbol {
    uint32_t begin = 0, len = 0;  // bytes of the text; len 0 = merged away
    int32_t id = -1;              // the caller's id of the symbol's text; a merge sets the pair's result
    int32_t prev = -1, next = -1;
};

struct MergePair {
    double cost = 0;  // lowest merges first (exact for int32 ranks and float scores)
    int32_t left = 0, right = 0;
    int32_t result = -1;
    uint32_t len = 0;  // combined length when queued: a pair whose sides changed since is stale
};

// Buffers one thread reuses across calls.
struct MergeScratch {
    std::vector<MergeSymbol> symbols;
    std::vector<MergePair> queue;
};

namespace detail {

// Heap order: the lowest cost on top, then the leftmost pair.
inline bool merges_after(const MergePair &a, const MergePair &b) {
    return a.cost > b.cost || (a.cost == b.cost && a.left > b.left);
}

}  // namespace detail

// Merges the symbols of `text` (not empty) and leaves them linked from
// symbols[0] in s.symbols. `id_of(std::string_view character)` gives each
// initial symbol's id. `rule(const MergeSymbol &left, const MergeSymbol &right,
// double &cost, int32_t &result)` says whether an adjacent pair may merge, and
// at which cost into which id.
template <class IdOf, class Rule>
void merge_symbols(std::string_view text, MergeScratch &s, IdOf &&id_of, Rule &&rule) {
    s.symbols.clear();
    for (size_t pos = 0; pos < text.size();) {
        const size_t len = std::min(utf8_char_len(static_cast<uint8_t>(text[pos])), text.size() - pos);
        const int32_t n = int32_t(s.symbols.size());
        s.symbols.push_back({uint32_t(pos), uint32_t(len), id_of(text.substr(pos, len)), n - 1, n + 1});
        pos += len;
    }
    s.symbols.back().next = -1;

    auto queue_pair = [&](int32_t left) {
        if (left < 0) return;
        const MergeSymbol &l = s.symbols[size_t(left)];
        if (l.next < 0) return;
        const MergeSymbol &r = s.symbols[size_t(l.next)];
        MergePair p{0, left, l.next, -1, l.len + r.len};
        if (!rule(l, r, p.cost, p.result)) return;
        s.queue.push_back(p);
        std::push_heap(s.queue.begin(), s.queue.end(), detail::merges_after);
    };

    s.queue.clear();
    for (int32_t i = 0; i + 1 < int32_t(s.symbols.size()); ++i) queue_pair(i);
    while (!s.queue.empty()) {
        std::pop_heap(s.queue.begin(), s.queue.end(), detail::merges_after);
        const MergePair p = s.queue.back();
        s.queue.pop_back();
        MergeSymbol &l = s.symbols[size_t(p.left)];
        MergeSymbol &r = s.symbols[size_t(p.right)];
        if (l.len == 0 || r.len == 0 || l.len + r.len != p.len) continue;  // stale
        l.len += r.len;
        l.id = p.result;
        l.next = r.next;
        if (r.next >= 0) s.symbols[size_t(r.next)].prev = p.left;
        r.len = 0;
        queue_pair(l.prev);
        queue_pair(p.left);
    }
}

}  // namespace moe::tok
