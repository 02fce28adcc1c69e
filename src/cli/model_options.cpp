#include "model_options.hpp"

#include "cli_util.hpp"

#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace cli {
namespace {

uint64_t size_option(const std::string &s) {
    uint64_t v = 0;
    if (!parse_size(s, v)) throw std::runtime_error("bad size '" + s + "'");
    return v;
}

int32_t parse_io_mode(const std::string &s) {
    static const char *const names[] = {"auto", "mmap", "direct", "pread"};
    for (int m = MOESTREAM_IO_AUTO; m <= MOESTREAM_IO_PREAD; ++m)
        if (s == names[m]) return m;
    throw std::runtime_error("unknown io mode '" + s + "' (auto, mmap, direct, pread)");
}

int32_t parse_prefetch(const std::string &s) {
    if (s == "auto") return MOESTREAM_PREFETCH_AUTO;
    if (s == "off") return MOESTREAM_PREFETCH_OFF;
    if (s == "previous") return MOESTREAM_PREFETCH_PREVIOUS_TOKEN;
    if (s == "lookahead") return MOESTREAM_PREFETCH_LOOKAHEAD;
    if (s == "both") return MOESTREAM_PREFETCH_BOTH;
    throw std::runtime_error("unknown prefetch mode '" + s + "' (auto, off, previous, lookahead, both)");
}

int32_t parse_cache_policy_option(const std::string &s) {
    if (s == "auto") return MOESTREAM_CACHE_AUTO;
    if (s == "lru") return MOESTREAM_CACHE_LRU;
    if (s == "lfu" || s == "lfu-decay") return MOESTREAM_CACHE_LFU_DECAY;
    if (s == "pinned" || s == "pinned-hot") return MOESTREAM_CACHE_PINNED_HOT;
    if (s == "reuse" || s == "reuse-aware") return MOESTREAM_CACHE_REUSE_AWARE;
    throw std::runtime_error("unknown cache policy '" + s + "' (auto, lru, lfu-decay, pinned-hot, reuse-aware)");
}

}  // namespace

int32_t parse_numa_placement(const std::string &s) {
    if (s == "local") return MOESTREAM_NUMA_LOCAL;
    if (s == "interleave") return MOESTREAM_NUMA_INTERLEAVE;
    throw std::runtime_error("unknown NUMA placement '" + s + "' (local, interleave)");
}

std::string option_value(const Args &args, size_t &i) {
    if (i + 1 >= args.size()) throw std::runtime_error("option " + args[i] + " needs a value");
    return args[++i];
}

int64_t int_option(const std::string &s, const char *what) {
    int64_t v = 0;
    if (!parse_int(s, v)) throw std::runtime_error(std::string("bad ") + what + " '" + s + "'");
    return v;
}

bool parse_model_option(const Args &args, size_t &i, ModelOptions &opt) {
    const std::string &a = args[i];
    if (opt.params.struct_size == 0) moestream_params_init(&opt.params);
    if (a == "-m" || a == "--model") opt.model_path = option_value(args, i);
    else if (a == "--threads" || a == "-t") opt.params.n_threads = int32_t(int_option(option_value(args, i), "thread count"));
    else if (a == "--ctx" || a == "-c") opt.params.n_ctx = int32_t(int_option(option_value(args, i), "context length"));
    else if (a == "--io-mode") opt.params.io_mode = parse_io_mode(option_value(args, i));
    else if (a == "--prefetch") opt.params.prefetch = parse_prefetch(option_value(args, i));
    else if (a == "--lookahead")
        opt.params.lookahead_layers = int32_t(int_option(option_value(args, i), "lookahead depth"));
    else if (a == "--numa") opt.params.numa_placement = parse_numa_placement(option_value(args, i));
    else if (a == "--cache-policy") opt.params.cache_policy = parse_cache_policy_option(option_value(args, i));
    else if (a == "--memory-budget") opt.params.memory_budget = size_option(option_value(args, i));
    else if (a == "--exact") opt.params.exact = 1;
    else if (a == "--batch") opt.batch = int32_t(int_option(option_value(args, i), "batch size"));
    else return false;
    return true;
}

std::vector<int32_t> parse_token_list(const std::string &s) {
    std::vector<int32_t> out;
    std::string cur;
    auto flush = [&] {
        if (!cur.empty()) out.push_back(int32_t(int_option(cur, "token id")));
        cur.clear();
    };
    for (char c : s) {
        if (c == ',' || std::isspace(static_cast<unsigned char>(c))) flush();
        else cur += c;
    }
    flush();
    return out;
}

std::vector<int32_t> read_token_file(const std::string &path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open token file '" + path + "': " + std::strerror(errno));
    std::stringstream ss;
    ss << in.rdbuf();
    return parse_token_list(ss.str());
}

moestream_context *open_model(ModelOptions &opt) {
    if (opt.params.struct_size == 0) moestream_params_init(&opt.params);
    opt.params.model_path = opt.model_path.c_str();
    moestream_context *ctx = nullptr;
    const int st = moestream_open(&opt.params, &ctx);
    if (st != MOESTREAM_OK) {
        report_error("open", "moestream_open", st);
        return nullptr;
    }
    return ctx;
}

void report_error(const char *cmd, const char *call, int status) {
    std::fprintf(stderr, "moestream %s: %s failed: %s: %s\n", cmd, call, moestream_status_string(status),
                 moestream_last_error());
}

}  // namespace cli
