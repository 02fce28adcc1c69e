// Small helpers shared by the CLI commands: option parsing, sizes, JSON text.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "commands.hpp"

namespace cli {

// Parsed command line: "--name value" / "--name=value" options, boolean flags
// and positional arguments, in the order given.
struct ParsedArgs {
    std::map<std::string, std::string> values;
    std::set<std::string> flags;
    std::vector<std::string> positional;

    bool has(const std::string &name) const { return values.count(name) || flags.count(name); }
    std::optional<std::string> get(const std::string &name) const;
    std::string get_or(const std::string &name, const std::string &fallback) const;
};

// Option names include their dashes ("--budget", "-m"). `aliases` maps a short
// name to its long one. Returns false with `error` set on an unknown option or
// a missing value.
bool parse_args(const Args &args, std::initializer_list<const char *> value_options,
                std::initializer_list<const char *> flag_options, ParsedArgs &out, std::string &error,
                std::initializer_list<std::pair<const char *, const char *>> aliases = {});

// "8GiB", "512MiB", "1.5G", "4096", "100k": binary units (k/K/KiB = 1024, ...).
// Returns false when the text is not a size.
bool parse_size(const std::string &text, uint64_t &out);
// "25%" of `total`, or an absolute size as parse_size.
bool parse_share_or_size(const std::string &text, uint64_t total, uint64_t &out);
bool parse_int(const std::string &text, int64_t &out);
bool parse_double(const std::string &text, double &out);
// Comma-separated list.
std::vector<std::string> split_list(const std::string &text, char separator = ',');

// "1.50 GiB", "312.0 MiB", "900 B".
std::string format_bytes(uint64_t bytes);
// Quoted JSON string with escapes.
std::string json_string(const std::string &text);

// Directory for cached artefacts: $XDG_CACHE_HOME/moestream or ~/.cache/moestream
// (created if missing; "" when no home is known).
std::string user_cache_dir();

}  // namespace cli
