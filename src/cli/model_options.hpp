// Options shared by the commands that open a model (logits, perplexity, run,
// tokenize): -m MODEL, --packed PATH, --threads N, --ctx N, --io-mode M,
// --memory-budget SIZE, --exact, --prefetch M, --lookahead N, --numa P, --cache-policy P.
// Each command parses its own extra options.
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
    std::string packed_path;  // "" = the library's MODEL.moepack when it matches
    // The least -c / --ctx the command takes, refused below it in the words of
    // every integer option's range; 0 (the default: the model's context) for
    // most, 2 for perplexity (a chunk predicts its tokens after the first).
    int32_t min_ctx = 0;
};

// The model options as help text lines, shared by every command's --help.
extern const char *const kModelOptionsHelp;

// Tries to consume args[i] (and its value) as a model option; returns false if
// it is not one. Throws std::runtime_error naming the option on a bad value.
bool parse_model_option(const Args &args, size_t &i, ModelOptions &opt);
// Each parser takes the names --help lists and throws std::runtime_error
// naming the accepted values (unknown_name_error) on anything else.
int32_t parse_io_mode(const std::string &s);         // auto, mmap, direct, pread
int32_t parse_numa_placement(const std::string &s);  // local, interleave
int32_t parse_prefetch(const std::string &s);        // auto, off, previous[-token], lookahead, both
int32_t parse_cache_policy(const std::string &s);    // auto, lru, lfu[-decay], pinned[-hot], reuse[-aware]
// The message of a usage error for a name an option does not take:
// "unknown WHAT 'TEXT' (NAMES)", NAMES the ones it takes ("auto, mmap, ...").
// Every option that takes one of a few names words a wrong one with it.
std::string unknown_name_error(const char *what, const std::string &text, const std::string &names);
// A cache policy name as parse_cache_policy takes it; false on anything else.
bool parse_cache_policy(const std::string &s, int32_t &out);
// The names parse_cache_policy takes, as its error lists them.
extern const char *const kCachePolicyNames;
// An I/O mode name as parse_io_mode takes it; false on anything else.
bool parse_io_mode(const std::string &s, int32_t &out);
// unknown_name_error for an I/O mode: the names parse_io_mode takes and, for
// a command that takes more (bench's "resident"), `more_names` after them.
std::string io_mode_error(const std::string &s, const char *more_names = nullptr);
// --feed of bench and trace record, what their decode steps are fed: true
// for random token ids, false for the greedy choice; throws
// std::runtime_error (unknown_name_error) on a name other than those two.
bool parse_feed_random(const std::string &s);
// Reads the value after args[i] (advancing i); throws when missing.
std::string option_value(const Args &args, size_t &i);
// An integer option value in [lo, hi]; throws naming `option` when it is not one.
int64_t int_option(const std::string &s, const char *option, int64_t lo, int64_t hi);
// "1,2,3" or whitespace/comma separated ids (32-bit; whether they are in the
// vocabulary is checked once a model is open).
std::vector<int32_t> parse_token_list(const std::string &s);
// The value of a --tokens LIST option: parse_token_list, and a usage error
// (thrown) when it lists no id, rather than the "required" error of no option.
std::vector<int32_t> token_list_option(const std::string &s);
// Throws std::runtime_error naming the file when it cannot be read.
std::vector<int32_t> read_token_file(const std::string &path);
// The files the model is read from, which an output must not replace
// (output_conflict, checked before the model is opened, rather than by the
// library once the work is done): model_shards and the packed expert file:
// `packed_path`, or when it is "" the one the library looks for beside the
// model (MODEL.moepack).
std::vector<std::string> model_files(const std::string &model_path, const std::string &packed_path);
// The GGUF files of the model: MODEL, and the other shards when it is the
// first of a split set (PREFIX-00001-of-0000N.gguf: the library opens
// PREFIX-0000K-of-0000N.gguf for K = 2..N). What pack, which writes the
// packed file, must not replace.
std::vector<std::string> model_shards(const std::string &model_path);
// The inputs of a command that reads the model and a text file (run -f,
// trace record -f): model_files and `text_file`, unless it is "" (no file:
// the text is given or read from standard input).
std::vector<std::string> model_and_text_files(const std::string &model_path, const std::string &packed_path,
                                              const std::string &text_file);
// The value of an option that names a file (--packed PATH, --save-state
// FILE, ...); throws file_name_error on "".
std::string file_name_option(const std::string &s, const std::string &option);
// Opens the model with the library's warnings going to stderr, or prints the
// library's error as "moestream <cmd>: ..." and returns NULL.
moestream_context *open_model(ModelOptions &opt, const char *cmd);

}  // namespace cli
