#include "cli_util.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string_view>

namespace cli {

std::optional<std::string> ParsedArgs::get(const std::string &name) const {
    auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
}

std::string ParsedArgs::get_or(const std::string &name, const std::string &fallback) const {
    auto it = values.find(name);
    return it == values.end() ? fallback : it->second;
}

bool parse_args(const Args &args, std::initializer_list<const char *> value_options,
                std::initializer_list<const char *> flag_options, ParsedArgs &out, std::string &error,
                std::initializer_list<std::pair<const char *, const char *>> aliases) {
    std::set<std::string> takes_value(value_options.begin(), value_options.end());
    std::set<std::string> is_flag(flag_options.begin(), flag_options.end());
    std::map<std::string, std::string> alias(aliases.begin(), aliases.end());
    for (size_t i = 0; i < args.size(); ++i) {
        std::string arg = args[i];
        if (!looks_like_option(arg)) {
            if (arg == "--") {
                for (++i; i < args.size(); ++i) out.positional.push_back(args[i]);
                break;
            }
            out.positional.push_back(arg);
            continue;
        }
        std::string value;
        bool has_inline = false;
        if (size_t eq = arg.find('='); eq != std::string::npos && arg.rfind("--", 0) == 0) {
            value = arg.substr(eq + 1);
            arg = arg.substr(0, eq);
            has_inline = true;
        }
        if (auto a = alias.find(arg); a != alias.end()) arg = a->second;
        if (is_flag.count(arg)) {
            if (has_inline) {
                error = no_value_error(arg);
                return false;
            }
            out.flags.insert(arg);
        } else if (takes_value.count(arg)) {
            if (!has_inline) {
                if (i + 1 >= args.size()) {
                    error = "option " + arg + " needs a value";
                    return false;
                }
                value = args[++i];
            }
            out.values[arg] = value;
        } else {
            error = unknown_argument(arg);
            return false;
        }
    }
    return true;
}

bool looks_like_option(const std::string &arg) {
    return arg.size() >= 2 && arg[0] == '-' && arg != "--" &&
           (arg[1] == '-' || (!std::isdigit(static_cast<unsigned char>(arg[1])) && arg[1] != '.'));
}

std::string unknown_argument(const std::string &arg) {
    return looks_like_option(arg) ? "unknown option " + arg : "unexpected argument '" + arg + "'";
}

std::string no_value_error(const std::string &option) { return "option " + option + " takes no value"; }

bool split_inline_value(Args &args, size_t i) {
    const size_t eq = args[i].find('=');
    if (args[i].rfind("--", 0) != 0 || eq == std::string::npos) return false;
    std::string value = args[i].substr(eq + 1);
    args[i].resize(eq);
    args.insert(args.begin() + std::ptrdiff_t(i) + 1, std::move(value));
    return true;
}

std::string file_name_error(const std::string &option) { return option + " needs a file name"; }

std::string empty_file_name(const ParsedArgs &parsed, std::initializer_list<const char *> options) {
    for (const char *option : options)
        if (auto v = parsed.get(option); v && v->empty()) return file_name_error(option);
    return "";
}

std::string unexpected_argument(const ParsedArgs &parsed) {
    return parsed.positional.empty() ? "" : unknown_argument(parsed.positional[0]);
}

int usage_error(const char *cmd, const std::string &what) {
    std::fprintf(stderr, "moestream %s: %s\n'moestream %s --help' lists the options.\n", cmd, what.c_str(), cmd);
    return 2;
}

// Every number of the command line is read by std::from_chars, which takes
// decimal digits and a leading '-' only: no blanks, no '+', no "0x" (strtol
// and strtod took all three, so "--memory-budget 0x10" was 16 bytes). The
// real-number forms also take a fraction and, unless `fixed`, an exponent.
namespace {

// The number at the start of `text` and the rest after it, or false.
bool leading_real(std::string_view text, bool fixed, double &out, std::string_view &rest) {
    const char *end = text.data() + text.size();
    const auto [ptr, ec] =
        std::from_chars(text.data(), end, out, fixed ? std::chars_format::fixed : std::chars_format::general);
    if (ec != std::errc() || !std::isfinite(out)) return false;
    rest = std::string_view(ptr, size_t(end - ptr));
    return true;
}

// The number a size or a share starts with: fixed-point and not negative.
// The one place a leading '-' is refused for them: from_chars reads one
// ("-0" is 0), and a value starting with '-' is no amount of bytes.
bool leading_amount(std::string_view text, double &out, std::string_view &rest) {
    return !text.empty() && text[0] != '-' && leading_real(text, true, out, rest);
}

}  // namespace

bool parse_double(const std::string &text, double &out) {
    std::string_view rest;
    double v = 0;
    if (!leading_real(text, false, v, rest) || !rest.empty()) return false;
    out = v;
    return true;
}

bool RealRange::contains(double v) const {
    return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
}

bool parse_double_in(const std::string &text, RealRange range, double &out) {
    double v = 0;
    if (!parse_double(text, v) || !range.contains(v)) return false;
    out = v;
    return true;
}

std::string real_range_error(const std::string &option, const std::string &text, RealRange range) {
    const bool has_lo = std::isfinite(range.lo), has_hi = std::isfinite(range.hi);
    std::string what = "a number";
    char bounds[96] = "";
    if (has_lo && !has_hi && range.lo == 0 && range.lo_open) what = "a positive number";
    else if (has_lo && !has_hi) std::snprintf(bounds, sizeof bounds, " of %s %g", range.lo_open ? "more than" : "at least", range.lo);
    else if (!has_lo && has_hi) std::snprintf(bounds, sizeof bounds, " of %s %g", range.hi_open ? "less than" : "at most", range.hi);
    else if (has_lo && has_hi) {
        // The open ends named after the closed range's wording: "from 0 to 1 (1 excluded)".
        char excluded[48] = "";
        if (range.lo_open && range.hi_open) std::snprintf(excluded, sizeof excluded, " (%g and %g excluded)", range.lo, range.hi);
        else if (range.lo_open || range.hi_open)
            std::snprintf(excluded, sizeof excluded, " (%g excluded)", range.lo_open ? range.lo : range.hi);
        std::snprintf(bounds, sizeof bounds, " from %g to %g%s", range.lo, range.hi, excluded);
    }
    return option + " takes " + what + bounds + ", got '" + text + "'";
}

bool parse_int(const std::string &text, int64_t &out) {
    int64_t v = 0;
    const char *end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, v, 10);
    if (ec != std::errc() || ptr != end) return false;
    out = v;
    return true;
}

bool parse_int_in(const std::string &text, int64_t lo, int64_t hi, int64_t &out) {
    int64_t v = 0;
    // A '-' only where negatives are allowed: "-0" is no count.
    if ((lo >= 0 && !text.empty() && text[0] == '-') || !parse_int(text, v) || v < lo || v > hi) return false;
    out = v;
    return true;
}

namespace {

// "OPTION takes an integer from LO to HI, got 'TEXT'": the bounds as text, so
// that a seed's, past int64_t, is worded as the others are.
std::string integer_range_error(const std::string &option, const std::string &text, const std::string &lo,
                                const std::string &hi) {
    return option + " takes an integer from " + lo + " to " + hi + ", got '" + text + "'";
}

}  // namespace

std::string int_range_error(const std::string &option, const std::string &text, int64_t lo, int64_t hi) {
    return integer_range_error(option, text, std::to_string(lo), std::to_string(hi));
}

bool parse_seed(const std::string &text, uint64_t &out) {
    uint64_t v = 0;
    const char *end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, v, 10);  // no '-' for an unsigned type
    if (ec != std::errc() || ptr != end) return false;
    out = v;
    return true;
}

std::string seed_error(const std::string &option, const std::string &text) {
    return integer_range_error(option, text, "0", std::to_string(std::numeric_limits<uint64_t>::max()));
}

namespace {

// A byte count computed in double, rounded; false beyond 64 bits. Not
// llround: it returns a long long, which holds only up to 2^63, so a size
// between 8 and 16 EiB (or a share of a huge total) came back as 2^63.
bool bytes_from_double(double bytes, uint64_t &out) {
    constexpr double k2To64 = 18446744073709551616.0;
    const double rounded = std::round(bytes);
    if (!(rounded >= 0) || rounded >= k2To64) return false;
    out = static_cast<uint64_t>(rounded);
    return true;
}

}  // namespace

bool parse_size(const std::string &text, uint64_t &out) {
    double v = 0;
    std::string_view rest;
    if (!leading_amount(text, v, rest)) return false;
    std::string unit(rest);
    for (char &c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    double mult = 1;
    if (unit.empty() || unit == "b") mult = 1;
    else if (unit == "k" || unit == "kib" || unit == "kb") mult = 1024.0;
    else if (unit == "m" || unit == "mib" || unit == "mb") mult = 1024.0 * 1024;
    else if (unit == "g" || unit == "gib" || unit == "gb") mult = 1024.0 * 1024 * 1024;
    else if (unit == "t" || unit == "tib" || unit == "tb") mult = 1024.0 * 1024 * 1024 * 1024;
    else return false;
    return bytes_from_double(v * mult, out);
}

bool parse_share_or_size(const std::string &text, uint64_t total, uint64_t &out) {
    if (!text.empty() && text.back() == '%') {
        double share = 0;
        std::string_view rest;
        if (!leading_amount(std::string_view(text).substr(0, text.size() - 1), share, rest) || !rest.empty())
            return false;
        return bytes_from_double(static_cast<double>(total) * share / 100.0, out);
    }
    return parse_size(text, out);
}

std::string size_error(const std::string &option, const std::string &text, SizeKind kind) {
    // "a positive share or size (50%, ...)": the examples start with a share
    // where one is taken, and leave out 4096 where it is below the least.
    const std::string least = kind.at_least ? std::string(" of at least ") + kind.at_least : "";
    const char *first = kind.share ? "50%, " : kind.at_least ? "" : "4096, ";
    const std::string what = std::string("a ") + (kind.positive ? "positive " : "") + (kind.share ? "share or " : "") +
                             "size" + least + " (" + first + "512MiB, 1.5GiB, ...)";
    return option + " takes " + what + ", got '" + text + "'";
}

std::vector<std::string> split_list(const std::string &text, char separator) {
    std::vector<std::string> parts;
    size_t start = 0;
    while (start <= text.size()) {
        size_t end = text.find(separator, start);
        if (end == std::string::npos) end = text.size();
        if (end > start) parts.push_back(text.substr(start, end - start));
        start = end + 1;
    }
    return parts;
}

std::string format_bytes(uint64_t bytes) {
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(bytes);
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        ++u;
    }
    char buf[48];
    if (u == 0) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
    else std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
    return buf;
}

std::string format_budget(uint64_t budget) { return budget ? format_bytes(budget) : "auto"; }

namespace {

// Length of the well-formed UTF-8 sequence at text[i] (RFC 3629: no overlong
// forms, surrogates or code points past U+10FFFF), or 0 if it is not one.
size_t utf8_sequence(const std::string &text, size_t i) {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char c = byte(i);
    size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    if (i + n > text.size() || byte(i + 1) < lo || byte(i + 1) > hi) return 0;
    for (size_t k = 2; k < n; ++k)
        if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
    return n;
}

}  // namespace

std::string json_string(const std::string &text) {
    std::string out = "\"";
    for (size_t i = 0; i < text.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(text[i]);
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
            if (c < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", c);
                out += buf;
            } else if (c < 0x80) {
                out += static_cast<char>(c);
            } else if (const size_t n = utf8_sequence(text, i)) {
                out.append(text, i, n);
                i += n - 1;
            } else {
                // A path or message need not be UTF-8 (file names are bytes);
                // JSON must be, so each byte that is not part of a valid
                // sequence becomes U+FFFD, as a lenient UTF-8 decoder shows it.
                out += "\\ufffd";
            }
        }
    }
    return out + "\"";
}

std::string read_input_file(const std::string &path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error("cannot open '" + path + "': " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        ::close(fd);
        throw std::runtime_error(path + ": is a directory");
    }
    std::string data;
    if (S_ISREG(st.st_mode)) data.reserve(size_t(st.st_size));
    char chunk[1 << 16];
    for (;;) {
        const ssize_t n = ::read(fd, chunk, sizeof chunk);
        if (n == 0) break;
        if (n < 0) {
            if (errno == EINTR) continue;
            const int err = errno;
            ::close(fd);
            throw std::runtime_error("cannot read '" + path + "': " + std::strerror(err));
        }
        data.append(chunk, size_t(n));
    }
    ::close(fd);
    return data;
}

std::string output_conflict(const std::string &output, const std::vector<std::string> &inputs) {
    struct stat out {};
    if (::stat(output.c_str(), &out) != 0) return "";  // a new file destroys nothing
    if (S_ISDIR(out.st_mode)) return output + ": is a directory";
    for (const std::string &input : inputs) {
        struct stat in {};
        if (::stat(input.c_str(), &in) == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino)
            return "refusing to write " + output + ": it is the input " + input;
    }
    return "";
}

namespace {
int first_stdout_errno = 0;
}  // namespace

bool flush_stdout() {
    errno = 0;
    if (std::fflush(stdout) == 0) return true;
    if (first_stdout_errno == 0) first_stdout_errno = errno;
    return false;
}

std::string stdout_failure() {
    if (flush_stdout() && !std::ferror(stdout)) return "";
    return first_stdout_errno ? std::strerror(first_stdout_errno) : "write error";
}

bool write_all(int fd, const void *data, size_t size) {
    const auto *p = static_cast<const uint8_t *>(data);
    while (size > 0) {
        const ssize_t n = ::write(fd, p, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        size -= size_t(n);
    }
    return true;
}

// Copies the finished temporary into the target opened by create() (a pipe,
// a device), then lets the destructor remove the temporary.
bool PendingOutput::copy_into_target(std::string &error) {
    std::vector<char> buf(size_t(1) << 20);
    const int in = ::open(temp_.c_str(), O_RDONLY | O_CLOEXEC);
    bool ok = in >= 0;
    for (ssize_t n = 0; ok && (n = ::read(in, buf.data(), buf.size())) != 0;) {
        if (n < 0 && errno == EINTR) continue;
        ok = n > 0 && write_all(out_fd_, buf.data(), size_t(n));
    }
    if (!ok) error = "cannot write " + target_ + ": " + std::strerror(errno);
    if (in >= 0) ::close(in);
    return ok;
}

PendingOutput::~PendingOutput() {
    if (!temp_.empty() && !direct_) ::unlink(temp_.c_str());
    if (out_fd_ >= 0) ::close(out_fd_);
}

bool PendingOutput::create(std::string &error) {
    // A symbolic link to a plain file is followed, so the file it names is
    // replaced by the rename and the link stays a link. Anything else that is
    // not a plain file (a pipe, a device, /dev/stdout leading to one) cannot
    // be replaced by a rename: it is written through, or gets a copy of the
    // finished output.
    dest_ = target_;
    struct stat st {};
    if (::lstat(target_.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
        if (S_ISLNK(st.st_mode) && ::stat(target_.c_str(), &st) != 0) {
            error = "cannot write " + target_ + ": it is a symbolic link to nothing";
            return false;
        }
        std::error_code ec;
        if (S_ISREG(st.st_mode)) dest_ = std::filesystem::canonical(target_, ec).string();
        if (!S_ISREG(st.st_mode) || ec) {
            if (non_plain_ == NonPlainTarget::write_through) {
                direct_ = true;
                temp_ = target_;
                return true;
            }
            // Opened now, so that a target that cannot be written fails before the work is done.
            out_fd_ = ::open(target_.c_str(), O_WRONLY | O_CLOEXEC);
            if (out_fd_ < 0) {
                error = "cannot write " + target_ + ": " + std::strerror(errno);
                return false;
            }
            copy_ = true;
        }
    }
    const std::filesystem::path dest(dest_);
    std::error_code ec;
    const std::filesystem::path dir = copy_ ? std::filesystem::temp_directory_path(ec)
                                    : dest.has_parent_path() ? dest.parent_path()
                                                             : std::filesystem::path(".");
    if (ec) {
        error = "no temporary directory for " + target_ + ": " + ec.message();
        return false;
    }
    // The target's name cut so ".NAME.tmp.XXXXXX" stays within a directory
    // entry's 255 bytes: a name near that limit is still writable.
    std::string temp = dir.string() + "/." + dest.filename().string().substr(0, 255 - 12) + ".tmp.XXXXXX";
    const InterruptsHeld held;  // until the temporary is registered for removal
    const int fd = ::mkostemp(temp.data(), O_CLOEXEC);
    if (fd < 0) {
        error = "cannot create a file in " + dir.string() + " for " + target_ + ": " + std::strerror(errno);
        return false;
    }
    remove_on_interrupt_.emplace(temp);
    // mkostemp makes the file private; the output gets the mode a plain create
    // would give it (reading the umask sets it: the CLI has no other threads here).
    const mode_t mask = ::umask(0);
    ::umask(mask);
    ::fchmod(fd, 0666 & ~mask);
    ::close(fd);
    temp_ = temp;
    return true;
}

bool PendingOutput::commit(std::string &error) {
    if (direct_) return true;
    if (copy_) return copy_into_target(error);
    if (::rename(temp_.c_str(), dest_.c_str()) != 0) {
        error = "cannot write " + target_ + ": " + std::strerror(errno);
        return false;
    }
    temp_.clear();
    remove_on_interrupt_.reset();  // the name is the target's now
    return true;
}

std::string library_error(const char *call, int status) {
    const std::string message = moestream_last_error(), prefix = std::string(call) + ": ";
    const std::string what = message.empty() ? std::string(call) + " failed"
                             : message.rfind(prefix, 0) == 0 ? message
                                                             : prefix + message;
    return what + " (" + moestream_status_string(status) + ")";
}

void report_error(const char *cmd, const char *call, int status) {
    std::fprintf(stderr, "moestream %s: %s\n", cmd, library_error(call, status).c_str());
}

namespace {

// The library logs an error only beside the status a call returns, and the
// command reports that status with its own name, so only warnings (what it
// cannot return, such as a usage profile not saved at close) are printed.
void print_library_message(int level, const char *message, void *) {
    if (level == MOESTREAM_LOG_WARN) std::fprintf(stderr, "moestream: warning: %s\n", message);
}

}  // namespace

void log_library_messages(moestream_params &params) {
    params.log_fn = print_library_message;
    params.log_user_data = nullptr;
    params.log_level = MOESTREAM_LOG_WARN;
}

std::string user_cache_dir(std::string &why) {
    std::string base;
    if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) base = xdg;
    else if (const char *home = std::getenv("HOME"); home && *home) base = std::string(home) + "/.cache";
    else {
        why = "no cache directory: neither XDG_CACHE_HOME nor HOME is set";
        return "";
    }
    std::string dir = base + "/moestream";
    for (const std::string &d : {base, dir}) {
        struct stat st {};
        if (::mkdir(d.c_str(), 0755) != 0 && !(errno == EEXIST && ::stat(d.c_str(), &st) == 0 && S_ISDIR(st.st_mode))) {
            why = "cannot create the cache directory " + d + ": " + std::strerror(errno == EEXIST ? ENOTDIR : errno);
            return "";
        }
    }
    return dir;
}

int32_t greedy_token(const std::vector<float> &logits) {
    int32_t best = -1;
    for (size_t i = 0; i < logits.size(); ++i) {
        const float v = logits[i];
        if (std::isnan(v) || v == -std::numeric_limits<float>::infinity()) continue;
        if (best < 0 || v > logits[size_t(best)]) best = int32_t(i);
    }
    return best;
}

}  // namespace cli
