// Byte-level BPE (GPT-2 style): pre-tokenize, map each piece's bytes to the
// byte-level alphabet, then repeatedly merge the adjacent pair with the
// lowest merge rank (leftmost on ties).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/log.hpp"
#include "tokenizer/pair_merge.hpp"
#include "tokenizer/pre_tokenizer.hpp"
#include "tokenizer/regex_split.hpp"
#include "tokenizer/vocab.hpp"

namespace moe::tok {

// Buffers one thread reuses across calls.
struct BpeScratch {
    std::string mapped;
    MergeScratch merge;
    std::vector<Piece> pieces;
    SplitScratch split;
};

class BpeTokenizer {
public:
    // Throws unsupported for an unknown pre-tokenizer; `log` hears of an
    // expression of its pre-tokenizer the JIT compiler could not compile.
    explicit BpeTokenizer(const Vocab &vocab, const Log &log = {});

    // Appends the tokens of text[range] (valid UTF-8, no special tokens).
    void tokenize(std::string_view text, Piece range, std::vector<int32_t> &out, BpeScratch &s) const;

private:
    void tokenize_piece(std::vector<int32_t> &out, BpeScratch &s) const;
    // Appends the token(s) of one byte-level character; throws bad_format when
    // neither it, nor its single bytes, nor an unknown token is in the vocabulary.
    void emit_character(std::string_view character, std::vector<int32_t> &out) const;

    const Vocab &vocab_;
    PreTokenizerSpec spec_;
    RegexSplitter splitter_;
};

}  // namespace moe::tok
