// Small helpers shared by the CLI commands: option parsing, sizes, JSON text.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "commands.hpp"
#include "moestream.h"
#include "remove_on_interrupt.hpp"

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

// Whether `arg` is spelt as an option ("-x", "--name"): not a lone "-", not
// "--", not a negative number ("-5", "-.5"), which are arguments.
bool looks_like_option(const std::string &arg);
// The usage error for an argument a command does not take, worded alike by
// every command: "unknown option --X" for an option, "unexpected argument 'X'"
// for anything else.
std::string unknown_argument(const std::string &arg);

// The usage error for a value given after '=' to an option that takes none
// ("--exact=1"): "option --exact takes no value", as every command words it.
std::string no_value_error(const std::string &option);

// Splits args[i], when it is "--name=value", into "--name" and "value";
// returns whether it did.
bool split_inline_value(Args &args, size_t i);

// The option loop of a command that reads its options one at a time (run,
// logits, perplexity, tokenize), so that they take the spellings parse_args
// takes and word the same mistakes alike. take(i) reads args[i] and any
// value after it (advancing i), returns false to end the loop (--help) and
// throws std::runtime_error for an argument it does not take. Each argument
// the loop reaches is split first when it is "--name=value" (never a value an
// option consumed: "-p --x=1" is the prompt "--x=1"), and a value so given to
// an option that read none is refused (no_value_error) rather than left to be
// taken as an argument of its own.
template <typename Take>
void read_options(Args &args, Take &&take) {
    for (size_t i = 0; i < args.size(); ++i) {
        const size_t at = i;
        const bool inline_value = split_inline_value(args, i);
        const bool more = take(i);
        if (inline_value && i == at) throw std::runtime_error(no_value_error(args[at]));
        if (!more) return;
    }
}

// The usage error for an option that names a file given "": "OPTION needs a
// file name". An empty name names no file; taken, it would stand for the
// option left out (no state saved, no heat map, the default packed file).
std::string file_name_error(const std::string &option);
// For a command parsed by parse_args: file_name_error for the first of
// `options` given as "", or "" when none is.
std::string empty_file_name(const ParsedArgs &parsed, std::initializer_list<const char *> options);

// For a command that takes no positional argument: "unexpected argument 'X'"
// naming the first one given, or "" when there is none.
std::string unexpected_argument(const ParsedArgs &parsed);

// Prints "moestream <cmd>: <what>" and where the options are described;
// returns 2, the status of a usage error. Commands report every usage error
// through it (the usage text itself goes to stdout, for --help only), so the
// error is the last thing on the screen rather than above the whole usage.
int usage_error(const char *cmd, const std::string &what);

// The one parser of each kind of number every command reads its options with.
// All take plain decimal only: no blanks, no '+', no hexadecimal, no inf or nan.
// "8GiB", "512MiB", "1.5G", "4096", "100k": binary units (k/K/KiB = 1024, ...),
// no exponent. Returns false when the text is not a size.
bool parse_size(const std::string &text, uint64_t &out);
// "25%" of `total`, or an absolute size as parse_size.
bool parse_share_or_size(const std::string &text, uint64_t total, uint64_t &out);
// What a size option takes, for the wording of size_error: independent
// choices, whether 0 is refused, whether a share ("25%") is taken too and the
// least size taken, as text ("1MiB"), when there is one.
struct SizeKind {
    bool positive = false;
    bool share = false;
    const char *at_least = nullptr;
};
// The message of a usage error for a size option whose value is not one:
// "OPTION takes a size (4096, 512MiB, 1.5GiB, ...), got 'TEXT'", in the shape
// of int_range_error's. Every size option (--memory-budget of every command
// included) reports a bad value with it.
std::string size_error(const std::string &option, const std::string &text, SizeKind kind);
// Digits with an optional leading '-'.
bool parse_int(const std::string &text, int64_t &out);
// An integer in [lo, hi]: parsed as 64 bits and range-checked, so a value too
// large for the field it fills is refused rather than wrapped; no '-' when lo >= 0.
bool parse_int_in(const std::string &text, int64_t lo, int64_t hi, int64_t &out);
// The message of a usage error for an integer option outside [lo, hi].
std::string int_range_error(const std::string &option, const std::string &text, int64_t lo, int64_t hi);
// A seed (every command's --seed): 0 .. 2^64-1 in decimal digits, so a
// negative one is refused rather than wrapped.
bool parse_seed(const std::string &text, uint64_t &out);
// The message of a usage error for a seed option whose value is not one, as
// int_range_error words it: "OPTION takes an integer from 0 to 18446744073709551615, got 'TEXT'".
std::string seed_error(const std::string &option, const std::string &text);
// A finite real number: digits with an optional '-', fraction and exponent ("5e-1").
bool parse_double(const std::string &text, double &out);
// The values a real-number option takes: from lo to hi, each end included
// unless it is open; an infinite end is no bound (parse_double takes finite
// numbers only).
struct RealRange {
    double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
    bool lo_open = false, hi_open = false;

    static RealRange any() { return {}; }
    static RealRange positive() { return {0, std::numeric_limits<double>::infinity(), true, false}; }
    static RealRange at_least(double lo) { return {lo, std::numeric_limits<double>::infinity(), false, false}; }
    static RealRange from_to(double lo, double hi) { return {lo, hi, false, false}; }
    // [lo, hi): a share of which the whole is no share (trace replay's --warmup).
    static RealRange from_below(double lo, double hi) { return {lo, hi, false, true}; }
    // (lo, hi]: a probability that must leave something (run's --top-p).
    static RealRange above_to(double lo, double hi) { return {lo, hi, true, false}; }
    bool contains(double v) const;
};
// A real number (parse_double) in `range`.
bool parse_double_in(const std::string &text, RealRange range, double &out);
// The message of a usage error for a real-number option outside `range`, in
// the shape of int_range_error's: "OPTION takes a number, got 'TEXT'",
// "... a positive number ...", "... a number of at least 0 ...",
// "... a number from 0 to 1 ...", "... a number from 0 to 1 (1 excluded) ...".
std::string real_range_error(const std::string &option, const std::string &text, RealRange range);
// Comma-separated list.
std::vector<std::string> split_list(const std::string &text, char separator = ',');

// "1.50 GiB", "312.0 MiB", "900 B".
std::string format_bytes(uint64_t bytes);
// A memory budget as format_bytes, or "auto" for 0: the library's automatic budget.
std::string format_budget(uint64_t budget);
// Quoted JSON string with escapes.
std::string json_string(const std::string &text);

// The whole of an input file; throws std::runtime_error naming the file when
// it cannot be read (a directory included: it would read as empty).
std::string read_input_file(const std::string &path);

// Why `output` must not be written, or "" when it may: it names the same file
// (device and inode) as one of `inputs`, which writing would destroy, or a
// directory. Checked before anything is opened for writing.
std::string output_conflict(const std::string &output, const std::vector<std::string> &inputs);

// fflush(stdout), keeping the errno of the first flush that fails: a
// command flushes before it forks or to show progress, and the check at exit
// (stdout_failure) then finds the error flag set but errno long overwritten.
// Every flush of stdout goes through it.
bool flush_stdout();
// Why output to stdout failed: strerror of the first failed flush_stdout(),
// "write error" when a write other than a flush failed, "" when none did.
std::string stdout_failure();

// Writes all `size` bytes to `fd`, resuming short writes; false on an error.
bool write_all(int fd, const void *data, size_t size);

// An output written under a temporary name beside its target and renamed over
// it by commit(), so a run that fails (or throws) first leaves neither a
// partial file nor a truncated earlier one: the destructor removes an
// uncommitted temporary. A symbolic link to a plain file is followed (the
// link stays a link). A target that is not a plain file (a pipe, a device,
// /dev/stdout leading to one) cannot be replaced by a rename: with
// NonPlainTarget::write_through path() is the target itself; with
// copy_on_commit (for writers that need a real file, such as the library,
// which renames its own temporary over the path it is given) path() is a
// temporary file of the system's temporary directory, copied into the target
// by commit().
enum class NonPlainTarget { write_through, copy_on_commit };
class PendingOutput {
public:
    explicit PendingOutput(std::string target, NonPlainTarget non_plain = NonPlainTarget::write_through)
        : target_(std::move(target)), non_plain_(non_plain) {}
    ~PendingOutput();
    PendingOutput(const PendingOutput &) = delete;
    PendingOutput &operator=(const PendingOutput &) = delete;

    // Creates the empty temporary; false with `error` set.
    bool create(std::string &error);
    // Where to write until commit().
    const std::string &path() const { return temp_; }
    // Renames the temporary over the target; false with `error` set.
    bool commit(std::string &error);

private:
    bool copy_into_target(std::string &error);
    std::string target_;
    NonPlainTarget non_plain_;
    std::string dest_;     // what the rename replaces: target_ with a link to a plain file followed
    std::string temp_;
    bool direct_ = false;  // write_through to a target that is not a plain file
    bool copy_ = false;    // copy_on_commit to a target that is not a plain file
    int out_fd_ = -1;      // copy_on_commit: the target, opened by create()
    std::optional<RemoveOnInterrupt> remove_on_interrupt_;  // for the temporary, which has a name
};

// The greedy choice: the id of the largest logit (lowest on ties), NaN
// skipped; -1 when no logit is a number above -inf (a model whose weights
// hold non-finite values), where an argmax would pick id 0 as if it meant something.
int32_t greedy_token(const std::vector<float> &logits);
// What to print when greedy_token finds nothing to pick.
constexpr const char *kNoGreedyToken =
    "the logits hold no number above -inf (NaN or -inf everywhere): the model's weights hold non-finite values";

// A failed library call as "CALL: MESSAGE (STATUS)": what failed, the
// library's message (moestream_last_error) and the status name. The message
// names the function it failed in first, so CALL is left out when the
// message starts with it. Every command reports a library failure this way.
std::string library_error(const char *call, int status);
// Prints "moestream <cmd>: <library_error(call, status)>" to stderr.
void report_error(const char *cmd, const char *call, int status);

// Passes the library's warnings to stderr ("moestream: warning: ...").
void log_library_messages(moestream_params &params);

// Directory for cached artefacts: $XDG_CACHE_HOME/moestream or ~/.cache/moestream
// (created if missing); "" with `why` set when there is no home or the
// directory cannot be created.
std::string user_cache_dir(std::string &why);

}  // namespace cli
