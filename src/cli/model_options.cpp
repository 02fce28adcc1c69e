#include "model_options.hpp"

#include "cli_util.hpp"

#include <cctype>
#include <cstdio>
#include <limits>
#include <stdexcept>

namespace cli {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

uint64_t size_option(const std::string &s, const std::string &option) {
    uint64_t v = 0;
    if (!parse_size(s, v)) throw std::runtime_error(size_error(option, s, SizeKind{}));
    return v;
}

int32_t int32_option(const Args &args, size_t &i, int64_t lo, int64_t hi) {
    const std::string &option = args[i];
    return int32_t(int_option(option_value(args, i), option.c_str(), lo, hi));
}

}  // namespace

const char *const kModelOptionsHelp =
    "model options:\n"
    "  -m, --model MODEL        the GGUF model (required)\n"
    "  --packed PATH            the packed expert file (moestream pack) to stream experts from; default:\n"
    "                           MODEL.moepack when it is there and matches the model\n"
    "  -t, --threads N          compute threads (default: one per physical core it may run on)\n"
    "  -c, --ctx N              context length (default: the model's, at most 4096)\n"
    "  --io-mode M              auto, mmap, direct or pread\n"
    "  --memory-budget SIZE     bytes for the whole engine (512MiB, 8GiB, ...; default 80% of available)\n"
    "  --prefetch M             auto, off, previous[-token], lookahead or both\n"
    "  --lookahead N            layers the router lookahead predicts ahead, 1..4\n"
    "  --numa P                 local or interleave\n"
    "  --max-batch N            tokens run through the model at once (default 64, or 512 / 256 when streaming\n"
    "                           and the budget affords it); larger: faster long prompts, more scratch memory\n"
    "  --cache-policy P         auto, lru, lfu[-decay], pinned[-hot] or reuse[-aware]\n"
    "  --exact                  f32 activations and f32 KV cache (slow, for checking)\n";

std::string unknown_name_error(const char *what, const std::string &text, const std::string &names) {
    return "unknown " + std::string(what) + " '" + text + "' (" + names + ")";
}

bool parse_io_mode(const std::string &s, int32_t &out) {
    static const char *const names[] = {"auto", "mmap", "direct", "pread"};
    for (int m = MOESTREAM_IO_AUTO; m <= MOESTREAM_IO_PREAD; ++m)
        if (s == names[m]) {
            out = m;
            return true;
        }
    return false;
}

std::string io_mode_error(const std::string &s, const char *more_names) {
    return unknown_name_error("io mode", s, std::string("auto, mmap, direct, pread") + (more_names ? ", " : "") +
                                                (more_names ? more_names : ""));
}

int32_t parse_io_mode(const std::string &s) {
    int32_t m = MOESTREAM_IO_AUTO;
    if (!parse_io_mode(s, m)) throw std::runtime_error(io_mode_error(s));
    return m;
}

int32_t parse_numa_placement(const std::string &s) {
    if (s == "local") return MOESTREAM_NUMA_LOCAL;
    if (s == "interleave") return MOESTREAM_NUMA_INTERLEAVE;
    throw std::runtime_error(unknown_name_error("NUMA placement", s, "local, interleave"));
}

int32_t parse_prefetch(const std::string &s) {
    if (s == "auto") return MOESTREAM_PREFETCH_AUTO;
    if (s == "off") return MOESTREAM_PREFETCH_OFF;
    if (s == "previous" || s == "previous-token") return MOESTREAM_PREFETCH_PREVIOUS_TOKEN;
    if (s == "lookahead") return MOESTREAM_PREFETCH_LOOKAHEAD;
    if (s == "both") return MOESTREAM_PREFETCH_BOTH;
    throw std::runtime_error(unknown_name_error("prefetch mode", s, "auto, off, previous, lookahead, both"));
}

const char *const kCachePolicyNames = "auto, lru, lfu-decay, pinned-hot, reuse-aware";

bool parse_cache_policy(const std::string &s, int32_t &out) {
    if (s == "auto") out = MOESTREAM_CACHE_AUTO;
    else if (s == "lru") out = MOESTREAM_CACHE_LRU;
    else if (s == "lfu" || s == "lfu-decay") out = MOESTREAM_CACHE_LFU_DECAY;
    else if (s == "pinned" || s == "pinned-hot") out = MOESTREAM_CACHE_PINNED_HOT;
    else if (s == "reuse" || s == "reuse-aware") out = MOESTREAM_CACHE_REUSE_AWARE;
    else return false;
    return true;
}

int32_t parse_cache_policy(const std::string &s) {
    int32_t policy = MOESTREAM_CACHE_AUTO;
    if (!parse_cache_policy(s, policy)) throw std::runtime_error(unknown_name_error("cache policy", s, kCachePolicyNames));
    return policy;
}

bool parse_feed_random(const std::string &s) {
    if (s != "greedy" && s != "random") throw std::runtime_error(unknown_name_error("feed mode", s, "greedy, random"));
    return s == "random";
}

std::string option_value(const Args &args, size_t &i) {
    if (i + 1 >= args.size()) throw std::runtime_error("option " + args[i] + " needs a value");
    return args[++i];
}

int64_t int_option(const std::string &s, const char *option, int64_t lo, int64_t hi) {
    int64_t v = 0;
    if (!parse_int_in(s, lo, hi, v)) throw std::runtime_error(int_range_error(option, s, lo, hi));
    return v;
}

bool parse_model_option(const Args &args, size_t &i, ModelOptions &opt) {
    const std::string &a = args[i];
    if (opt.params.struct_size == 0) moestream_params_init(&opt.params);
    if (a == "-m" || a == "--model") opt.model_path = file_name_option(option_value(args, i), a);
    else if (a == "--packed") opt.packed_path = file_name_option(option_value(args, i), a);
    else if (a == "--threads" || a == "-t") opt.params.n_threads = int32_option(args, i, 0, kInt32Max);
    else if (a == "--ctx" || a == "-c") opt.params.n_ctx = int32_option(args, i, opt.min_ctx, kInt32Max);
    else if (a == "--io-mode") opt.params.io_mode = parse_io_mode(option_value(args, i));
    else if (a == "--prefetch") opt.params.prefetch = parse_prefetch(option_value(args, i));
    else if (a == "--lookahead") opt.params.lookahead_layers = int32_option(args, i, 1, 4);
    else if (a == "--numa") opt.params.numa_placement = parse_numa_placement(option_value(args, i));
    else if (a == "--max-batch") opt.params.max_batch = int32_option(args, i, 1, kInt32Max);
    else if (a == "--cache-policy") opt.params.cache_policy = parse_cache_policy(option_value(args, i));
    else if (a == "--memory-budget") opt.params.memory_budget = size_option(option_value(args, i), a);
    else if (a == "--exact") opt.params.exact = 1;
    else return false;
    return true;
}

std::vector<int32_t> parse_token_list(const std::string &s) {
    std::vector<int32_t> out;
    std::string cur;
    auto flush = [&] {
        int64_t id = 0;
        if (!cur.empty() && !parse_int_in(cur, std::numeric_limits<int32_t>::min(), kInt32Max, id))
            throw std::runtime_error("bad token id '" + cur + "' (token ids are 32-bit integers)");
        if (!cur.empty()) out.push_back(int32_t(id));
        cur.clear();
    };
    for (char c : s) {
        if (c == ',' || std::isspace(static_cast<unsigned char>(c))) flush();
        else cur += c;
    }
    flush();
    return out;
}

std::vector<int32_t> token_list_option(const std::string &s) {
    std::vector<int32_t> ids = parse_token_list(s);
    if (ids.empty()) throw std::runtime_error("--tokens lists no token id");
    return ids;
}

std::vector<int32_t> read_token_file(const std::string &path) {
    const std::string text = read_input_file(path);
    try {
        return parse_token_list(text);
    } catch (const std::runtime_error &e) {
        throw std::runtime_error(path + ": " + e.what());
    }
}

std::string file_name_option(const std::string &s, const std::string &option) {
    if (s.empty()) throw std::runtime_error(file_name_error(option));
    return s;
}

std::vector<std::string> model_shards(const std::string &model_path) {
    std::vector<std::string> files{model_path};
    const std::string first = "-00001-of-", ext = ".gguf";
    const size_t at = model_path.rfind(first);
    if (at != std::string::npos && model_path.size() >= at + first.size() + ext.size() &&
        model_path.compare(model_path.size() - ext.size(), ext.size(), ext) == 0) {
        const std::string count_text =
            model_path.substr(at + first.size(), model_path.size() - ext.size() - at - first.size());
        int64_t count = 0;
        char digits[16];
        // The count as the library writes it (%05u); a set of more shards
        // than five digits count is not listed.
        if (parse_int_in(count_text, 2, 99999, count) &&
            std::snprintf(digits, sizeof digits, "%05d", int(count)) > 0 && count_text == digits) {
            for (int k = 2; k <= count; ++k) {
                std::snprintf(digits, sizeof digits, "-%05d-of-", k);
                files.push_back(model_path.substr(0, at) + digits + count_text + ext);
            }
        }
    }
    return files;
}

std::vector<std::string> model_files(const std::string &model_path, const std::string &packed_path) {
    std::vector<std::string> files = model_shards(model_path);
    files.push_back(packed_path.empty() ? model_path + ".moepack" : packed_path);
    return files;
}

std::vector<std::string> model_and_text_files(const std::string &model_path, const std::string &packed_path,
                                              const std::string &text_file) {
    std::vector<std::string> files = model_files(model_path, packed_path);
    if (!text_file.empty()) files.push_back(text_file);
    return files;
}

moestream_context *open_model(ModelOptions &opt, const char *cmd) {
    if (opt.params.struct_size == 0) moestream_params_init(&opt.params);
    opt.params.model_path = opt.model_path.c_str();
    opt.params.packed_path = opt.packed_path.empty() ? nullptr : opt.packed_path.c_str();
    log_library_messages(opt.params);
    moestream_context *ctx = nullptr;
    const int st = moestream_open(&opt.params, &ctx);
    if (st != MOESTREAM_OK) {
        report_error(cmd, "moestream_open", st);
        return nullptr;
    }
    return ctx;
}

}  // namespace cli
