#include "tokenizer/bpe.hpp"

#include <algorithm>

#include "tokenizer/byte_unicode.hpp"
#include "tokenizer/utf8.hpp"

namespace moe::tok {
namespace {

// Heap order: the lowest rank on top, then the leftmost pair.
bool comes_after(const BpeScratch::Pair &a, const BpeScratch::Pair &b) {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
}

}  // namespace

BpeTokenizer::BpeTokenizer(const Vocab &vocab)
    : vocab_(vocab), spec_(pre_tokenizer_spec(vocab.pre())), splitter_(spec_.patterns) {}

void BpeTokenizer::tokenize(std::string_view text, Piece range, std::vector<int32_t> &out, BpeScratch &s) const {
    s.pieces.clear();
    splitter_.split(text, range, s.pieces, s.split);
    for (const Piece &p : s.pieces) {
        s.mapped.clear();
        for (size_t i = p.begin; i < p.end; ++i) s.mapped += byte_to_unicode(static_cast<uint8_t>(text[i]));
        tokenize_piece(out, s);
    }
}

void BpeTokenizer::queue_pair(int32_t left, BpeScratch &s) const {
    if (left < 0) return;
    const BpeScratch::Symbol &l = s.symbols[size_t(left)];
    if (l.next < 0) return;
    const BpeScratch::Symbol &r = s.symbols[size_t(l.next)];
    if (l.id < 0 || r.id < 0) return;
    const MergeRule *rule = vocab_.merge(l.id, r.id);
    if (!rule) return;
    s.queue.push_back({rule->rank, left, l.next, rule->result, l.len + r.len});
    std::push_heap(s.queue.begin(), s.queue.end(), comes_after);
}

void BpeTokenizer::tokenize_piece(std::vector<int32_t> &out, BpeScratch &s) const {
    const std::string_view mapped = s.mapped;
    if (mapped.empty()) return;
    if (spec_.ignore_merges) {
        const int32_t whole = vocab_.find(mapped);
        if (whole >= 0) {
            out.push_back(whole);
            return;
        }
    }
    s.symbols.clear();
    for (size_t pos = 0; pos < mapped.size();) {
        const size_t len = std::min(utf8_char_len(static_cast<uint8_t>(mapped[pos])), mapped.size() - pos);
        const int32_t n = int32_t(s.symbols.size());
        s.symbols.push_back({uint32_t(pos), uint32_t(len), vocab_.symbol_id(mapped.substr(pos, len)), n - 1, n + 1});
        pos += len;
    }
    s.symbols.back().next = -1;

    s.queue.clear();
    for (int32_t i = 0; i + 1 < int32_t(s.symbols.size()); ++i) queue_pair(i, s);
    while (!s.queue.empty()) {
        std::pop_heap(s.queue.begin(), s.queue.end(), comes_after);
        const BpeScratch::Pair p = s.queue.back();
        s.queue.pop_back();
        BpeScratch::Symbol &l = s.symbols[size_t(p.left)];
        BpeScratch::Symbol &r = s.symbols[size_t(p.right)];
        if (l.len == 0 || r.len == 0 || l.len + r.len != p.len) continue;  // stale
        l.len += r.len;
        l.id = p.result;
        l.next = r.next;
        if (r.next >= 0) s.symbols[size_t(r.next)].prev = p.left;
        r.len = 0;
        queue_pair(l.prev, s);
        queue_pair(p.left, s);
    }

    const int32_t n_tokens = vocab_.n_tokens();
    for (int32_t i = 0; i >= 0; i = s.symbols[size_t(i)].next) {
        const BpeScratch::Symbol &sym = s.symbols[size_t(i)];
        if (sym.id >= 0 && sym.id < n_tokens) {
            out.push_back(sym.id);
            continue;
        }
        // Not a token: fall back to the single bytes of its text that are.
        for (uint32_t k = 0; k < sym.len; ++k) {
            const int32_t id = vocab_.find(mapped.substr(sym.begin + k, 1));
            if (id >= 0) out.push_back(id);
        }
    }
}

}  // namespace moe::tok
