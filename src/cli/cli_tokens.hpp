// Text <-> token ids through the library's tokenizer, for the commands that
// accept text (run -p, perplexity -f, tokenize).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "moestream.h"

namespace cli {

// Tokenizes text; on failure prints "moestream <cmd>: ..." and returns false.
bool tokenize_text(moestream_context *ctx, const std::string &text, bool add_special, bool parse_special,
                   std::vector<int32_t> &out, const char *cmd);
// The bytes of one token; on failure prints the error and returns false.
bool token_piece(moestream_context *ctx, int32_t token, std::string &out, const char *cmd);
// Whether every id is in the model's vocabulary; prints the first that is
// not, with its position, as "moestream <cmd>: ..." and returns false.
bool tokens_in_vocabulary(moestream_context *ctx, const std::vector<int32_t> &tokens, const char *cmd);

}  // namespace cli
