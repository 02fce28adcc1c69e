// The bytes one token stands for: byte-level decoding for BPE tokens, U+2581
// back to spaces and <0xXX> byte tokens for SPM; control, user-defined and
// unknown tokens give their text as written.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/vocab.hpp"

namespace moe::tok {

// Appends the bytes of token `id` (which must be in range) to out.
void append_token_bytes(const Vocab &vocab, int32_t id, std::string &out);

}  // namespace moe::tok
