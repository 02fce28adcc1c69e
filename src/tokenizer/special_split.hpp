// Cuts text at literal occurrences of special tokens. Longer tokens are
// matched first; each token then splits whatever raw text is left, left to
// right. Control and unknown tokens are matched only when asked to
// (parse_special); user-defined tokens always are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.hpp"

namespace moe::tok {

// Raw text (token < 0: text[begin, end)) or one special token.
struct Fragment {
    int32_t token = -1;
    size_t begin = 0;
    size_t end = 0;
};

// Replaces `out` with the fragments of text; `scratch` is reused.
void split_special(const Vocab &vocab, std::string_view text, bool parse_special, std::vector<Fragment> &out,
                   std::vector<Fragment> &scratch);

}  // namespace moe::tok
