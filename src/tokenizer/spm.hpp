// SentencePiece-style BPE over token scores (tokenizer.ggml.model "llama"):
// spaces become U+2581, then adjacent pairs whose concatenation is a token
// are merged highest score first (leftmost on ties); characters left
// without a token fall back to <0xXX> byte tokens.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.hpp"

namespace moe::tok {

struct SpmScratch {
    struct Symbol {
        uint32_t begin = 0, len = 0;  // len 0 = merged away
        int32_t prev = -1, next = -1;
    };
    struct Pair {
        float score = 0;
        int32_t left = 0, right = 0;
        uint32_t len = 0;
    };
    std::string escaped;
    std::vector<Symbol> symbols;
    std::vector<Pair> queue;
};

class SpmTokenizer {
public:
    explicit SpmTokenizer(const Vocab &vocab) : vocab_(vocab) {}

    // Appends the tokens of `text` (valid UTF-8, no special tokens);
    // `space_prefix` puts one space in front first.
    void tokenize(std::string_view text, bool space_prefix, std::vector<int32_t> &out, SpmScratch &s) const;

private:
    void queue_pair(int32_t left, SpmScratch &s) const;
    void emit_bytes(std::string_view bytes, std::vector<int32_t> &out) const;

    const Vocab &vocab_;
};

}  // namespace moe::tok
