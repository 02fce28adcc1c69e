// Options shared by the commands that open a model (logits, perplexity, run):
// -m MODEL, --threads N, --ctx N, --io-mode M, --memory-budget SIZE, --exact,
// --prefetch M, --lookahead N, --numa P, --batch N. Each command parses its own extra options.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "commands.hpp"
#include "moestream.h"

namespace cli {

struct ModelOptions {
    moestream_params params{};
    std::string model_path;
    int32_t batch = 0;  // tokens per moestream_step call; 0 = all at once
};

// Tries to consume args[i] (and its value) as a model option; returns false if
// it is not one. Throws std::runtime_error on a bad value.
bool parse_model_option(const Args &args, size_t &i, ModelOptions &opt);
// "local" or "interleave" (moestream_numa_placement); throws on anything else.
int32_t parse_numa_placement(const std::string &s);
// Reads the value after args[i] (advancing i); throws when missing.
std::string option_value(const Args &args, size_t &i);
// An integer option value; throws naming `what` when it is not one.
int64_t int_option(const std::string &s, const char *what);
// "1,2,3" or whitespace/comma separated ids.
std::vector<int32_t> parse_token_list(const std::string &s);
std::vector<int32_t> read_token_file(const std::string &path);
// Opens the model or prints the library's error and returns NULL.
moestream_context *open_model(ModelOptions &opt);
// Prints "moestream <cmd>: <call> failed: <status>: <last error>".
void report_error(const char *cmd, const char *call, int status);

}  // namespace cli
