// SentencePiece-style BPE over token scores (tokenizer.ggml.model "llama"):
// spaces become U+2581, then adjacent pairs whose concatenation is a token
// are merged highest score first (leftmost on ties); characters left
// without a token fall back to <0xXX> byte tokens.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/pair_merge.hpp"
#include "tokenizer/vocab.hpp"

namespace moe::tok {

// Buffers one thread reuses across calls.
struct SpmScratch {
    std::string escaped;
    MergeScratch merge;
};

class SpmTokenizer {
public:
    explicit SpmTokenizer(const Vocab &vocab) : vocab_(vocab) {}

    // Appends the tokens of `text` (valid UTF-8, no special tokens);
    // `space_prefix` puts one space in front first.
    void tokenize(std::string_view text, bool space_prefix, std::vector<int32_t> &out, SpmScratch &s) const;

private:
    void emit_bytes(std::string_view bytes, std::vector<int32_t> &out) const;

    const Vocab &vocab_;
};

}  // namespace moe::tok
