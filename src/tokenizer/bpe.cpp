#include "tokenizer/bpe.hpp"

#include <algorithm>

#include "tokenizer/byte_unicode.hpp"

namespace moe::tok {

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
    merge_symbols(
        mapped, s.merge, [&](std::string_view character) { return vocab_.symbol_id(character); },
        [&](const MergeSymbol &l, const MergeSymbol &r, double &cost, int32_t &result) {
            if (l.id < 0 || r.id < 0) return false;
            const MergeRule *rule = vocab_.merge(l.id, r.id);
            if (!rule) return false;
            cost = rule->rank;
            result = rule->result;
            return true;
        });

    const int32_t n_tokens = vocab_.n_tokens();
    for (int32_t i = 0; i >= 0; i = s.merge.symbols[size_t(i)].next) {
        const MergeSymbol &sym = s.merge.symbols[size_t(i)];
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
