#include "cli_util.hpp"

#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

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
        if (arg.size() < 2 || arg[0] != '-' || arg == "--" ||
            (arg[1] != '-' && (std::isdigit(static_cast<unsigned char>(arg[1])) || arg[1] == '.'))) {
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
                error = "option " + arg + " takes no value";
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
            error = "unknown option " + arg;
            return false;
        }
    }
    return true;
}

bool parse_double(const std::string &text, double &out) {
    if (text.empty()) return false;
    char *end = nullptr;
    errno = 0;
    double v = std::strtod(text.c_str(), &end);
    if (errno || *end || !std::isfinite(v)) return false;
    out = v;
    return true;
}

bool parse_int(const std::string &text, int64_t &out) {
    if (text.empty()) return false;
    char *end = nullptr;
    errno = 0;
    long long v = std::strtoll(text.c_str(), &end, 10);
    if (errno || *end) return false;
    out = v;
    return true;
}

bool parse_size(const std::string &text, uint64_t &out) {
    if (text.empty()) return false;
    char *end = nullptr;
    errno = 0;
    double v = std::strtod(text.c_str(), &end);
    if (errno || end == text.c_str() || !std::isfinite(v) || v < 0) return false;
    std::string unit(end);
    for (char &c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    double mult = 1;
    if (unit.empty() || unit == "b") mult = 1;
    else if (unit == "k" || unit == "kib" || unit == "kb") mult = 1024.0;
    else if (unit == "m" || unit == "mib" || unit == "mb") mult = 1024.0 * 1024;
    else if (unit == "g" || unit == "gib" || unit == "gb") mult = 1024.0 * 1024 * 1024;
    else if (unit == "t" || unit == "tib" || unit == "tb") mult = 1024.0 * 1024 * 1024 * 1024;
    else return false;
    double bytes = v * mult;
    if (bytes > 1.8e19) return false;
    out = static_cast<uint64_t>(std::llround(bytes));
    return true;
}

bool parse_share_or_size(const std::string &text, uint64_t total, uint64_t &out) {
    if (!text.empty() && text.back() == '%') {
        double share = 0;
        if (!parse_double(text.substr(0, text.size() - 1), share) || share < 0) return false;
        out = static_cast<uint64_t>(std::llround(static_cast<double>(total) * share / 100.0));
        return true;
    }
    return parse_size(text, out);
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

std::string json_string(const std::string &text) {
    std::string out = "\"";
    for (unsigned char c : text) {
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
            } else {
                out += static_cast<char>(c);
            }
        }
    }
    return out + "\"";
}

std::string user_cache_dir() {
    std::string base;
    if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) base = xdg;
    else if (const char *home = std::getenv("HOME"); home && *home) base = std::string(home) + "/.cache";
    else return "";
    ::mkdir(base.c_str(), 0755);
    std::string dir = base + "/moestream";
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return "";
    return dir;
}

}  // namespace cli
