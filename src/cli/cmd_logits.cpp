// moestream logits: runs token ids through the model and writes the last
// token's logits as raw little-endian float32 (n_vocab values per record).
#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "model_options.hpp"

namespace cli {
namespace {

void usage() {
    std::fprintf(stderr,
                 "usage: moestream logits -m MODEL --tokens 1,2,3 --out FILE [options]\n"
                 "  --tokens LIST        token ids, comma separated\n"
                 "  --out FILE           where to write the logits (raw float32)\n"
                 "  --batch N            feed the tokens N per step (default: all in one step)\n"
                 "  --all                write the last-token logits of every step, not only the final one\n"
                 "  --exact              f32 activations and f32 KV cache\n"
                 "  --threads N, --ctx N, --io-mode auto|mmap|direct|pread, --memory-budget SIZE,\n"
                 "  --prefetch auto|off|previous|lookahead|both, --lookahead N, --numa local|interleave,\n"
                 "  --cache-policy auto|lru|lfu-decay|pinned-hot|reuse-aware\n");
}

}  // namespace

int cmd_logits(const Args &args) {
    ModelOptions opt;
    std::vector<int32_t> tokens;
    std::string out_path;
    bool all = false;
    try {
        for (size_t i = 0; i < args.size(); ++i) {
            const std::string &a = args[i];
            if (a == "--help" || a == "-h") {
                usage();
                return 0;
            }
            if (parse_model_option(args, i, opt)) continue;
            if (a == "--tokens") tokens = parse_token_list(option_value(args, i));
            else if (a == "--out" || a == "-o") out_path = option_value(args, i);
            else if (a == "--all") all = true;
            else throw std::runtime_error("unknown option '" + a + "'");
        }
        if (opt.model_path.empty() || tokens.empty() || out_path.empty())
            throw std::runtime_error("-m, --tokens and --out are required");
        if (opt.batch < 0) throw std::runtime_error("--batch must be positive");
    } catch (const std::exception &e) {
        std::fprintf(stderr, "moestream logits: %s\n", e.what());
        usage();
        return 2;
    }

    moestream_context *ctx = open_model(opt);
    if (!ctx) return 1;
    const int32_t n_vocab = moestream_n_vocab(ctx);
    std::vector<float> logits(static_cast<size_t>(n_vocab));
    FILE *out = std::fopen(out_path.c_str(), "wb");
    if (!out) {
        std::perror(out_path.c_str());
        moestream_close(ctx);
        return 1;
    }
    const int32_t n = int32_t(tokens.size());
    const int32_t batch = opt.batch > 0 ? opt.batch : n;
    int rc = 0;
    for (int32_t done = 0; done < n && rc == 0;) {
        const int32_t count = std::min(batch, n - done);
        const int st = moestream_step(ctx, tokens.data() + done, count, logits.data());
        if (st != MOESTREAM_OK) {
            report_error("logits", "moestream_step", st);
            rc = 1;
            break;
        }
        done += count;
        if (all || done == n) {
            if (std::fwrite(logits.data(), sizeof(float), logits.size(), out) != logits.size()) {
                std::perror(out_path.c_str());
                rc = 1;
            }
        }
    }
    if (std::fclose(out) != 0 && rc == 0) {
        std::perror(out_path.c_str());
        rc = 1;
    }
    moestream_close(ctx);
    return rc;
}

}  // namespace cli
