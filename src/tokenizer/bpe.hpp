// Byte-level BPE (GPT-2 style): pre-tokenize, map each piece's bytes to the
// byte-level alphabet, then repeatedly merge the adjacent pair with the
// lowest merge rank (leftmost on ties).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/pre_tokenizer.hpp"
#include "tokenizer/regex_split.hpp"
#include "tokenizer/vocab.hpp"

namespace moe::tok {

// Buffers one thread reuses across calls.
struct BpeScratch {
    struct Symbol {
        uint32_t begin = 0, len = 0;  // bytes of the mapped piece; len 0 = merged away
        int32_t id = -1;              // Vocab symbol id, -1 when the text is in no merge and no token
        int32_t prev = -1, next = -1;
    };
    struct Pair {
        int32_t rank = 0;
        int32_t left = 0, right = 0;
        int32_t result = 0;
        uint32_t len = 0;  // combined length when queued: a pair whose sides changed since is stale
    };
    std::string mapped;
    std::vector<Symbol> symbols;
    std::vector<Pair> queue;
    std::vector<Piece> pieces;
    SplitScratch split;
};

class BpeTokenizer {
public:
    // Throws unsupported for an unknown pre-tokenizer.
    explicit BpeTokenizer(const Vocab &vocab);

    // Appends the tokens of text[range] (valid UTF-8, no special tokens).
    void tokenize(std::string_view text, Piece range, std::vector<int32_t> &out, BpeScratch &s) const;

private:
    void tokenize_piece(std::vector<int32_t> &out, BpeScratch &s) const;
    void queue_pair(int32_t left, BpeScratch &s) const;

    const Vocab &vocab_;
    PreTokenizerSpec spec_;
    RegexSplitter splitter_;
};

}  // namespace moe::tok
