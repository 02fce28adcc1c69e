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
// Whole file as bytes; throws std::runtime_error naming the file.
std::string read_text_file(const std::string &path);

}  // namespace cli
