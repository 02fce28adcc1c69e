// Byte-level BPE pre-tokenizers by tokenizer.ggml.pre name: the expressions
// that cut text into pieces before merging, and whether a piece that is
// itself a token skips merging.
#pragma once

#include <string>
#include <vector>

namespace moe::tok {

struct PreTokenizerSpec {
    std::vector<std::string> patterns;  // applied in sequence (regex_split.hpp)
    bool ignore_merges = false;
};

// Throws unsupported naming the pre-tokenizer when it is unknown.
PreTokenizerSpec pre_tokenizer_spec(const std::string &name);

}  // namespace moe::tok
