// moestream logits: runs token ids through the model and writes the last
// token's logits as raw little-endian float32 (n_vocab values per record).
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "cli_util.hpp"
#include "model_options.hpp"

namespace cli {
namespace {

void print_help() {
    std::printf("usage: moestream logits -m MODEL --tokens 1,2,3 --out FILE [--batch N] [--all] [model options]\n"
                "  --tokens LIST            token ids, comma separated\n"
                "  -o, --out FILE           where to write the logits (raw float32); replaced only when the run\n"
                "                           succeeds; --output is the same option\n"
                "  --batch N                feed the tokens N per step (default: all in one step)\n"
                "  --all                    write the last-token logits of every step, not only the final one\n%s",
                kModelOptionsHelp);
}

// Runs the tokens `batch` per step and writes the logits to `out`; prints
// what failed and returns false.
bool write_logits(moestream_context *ctx, const std::vector<int32_t> &tokens, int32_t batch, bool all, FILE *out,
                  const std::string &out_name) {
    std::vector<float> logits(static_cast<size_t>(moestream_n_vocab(ctx)));
    const int32_t n = int32_t(tokens.size());
    for (int32_t done = 0; done < n;) {
        const int32_t count = std::min(batch, n - done);
        const int st = moestream_step(ctx, tokens.data() + done, count, logits.data());
        if (st != MOESTREAM_OK) {
            report_error("logits", "moestream_step", st);
            return false;
        }
        done += count;
        if ((all || done == n) && std::fwrite(logits.data(), sizeof(float), logits.size(), out) != logits.size()) {
            std::perror(out_name.c_str());
            return false;
        }
    }
    return true;
}

}  // namespace

int cmd_logits(const Args &given) {
    Args args = given;  // "--name=value" split as the loop reaches it
    ModelOptions opt;
    std::vector<int32_t> tokens;
    std::string out_path;
    bool all = false;
    int32_t batch = 0;  // tokens per moestream_step call; 0 = all at once
    bool help = false;
    try {
        read_options(args, [&](size_t &i) {
            const std::string &a = args[i];
            if (a == "--help" || a == "-h") {
                help = true;
                return false;
            }
            if (parse_model_option(args, i, opt)) return true;
            if (a == "--tokens") tokens = token_list_option(option_value(args, i));
            // --output too: the long name of every other command's -o.
            else if (a == "--out" || a == "-o" || a == "--output") out_path = file_name_option(option_value(args, i), a);
            else if (a == "--all") all = true;
            else if (a == "--batch")
                batch = int32_t(int_option(option_value(args, i), "--batch", 0, std::numeric_limits<int32_t>::max()));
            else throw std::runtime_error(unknown_argument(a));
            return true;
        });
        if (help) {
            print_help();
            return 0;
        }
        if (opt.model_path.empty() || tokens.empty() || out_path.empty())
            throw std::runtime_error("-m, --tokens and --out are required");
    } catch (const std::exception &e) {
        return usage_error("logits", e.what());
    }
    if (const std::string why = output_conflict(out_path, model_files(opt.model_path, opt.packed_path)); !why.empty()) {
        std::fprintf(stderr, "moestream logits: %s\n", why.c_str());
        return 1;
    }
    PendingOutput output(out_path);
    std::string error;
    FILE *out = output.create(error) ? std::fopen(output.path().c_str(), "wb") : nullptr;
    if (!out) {
        std::fprintf(stderr, "moestream logits: %s\n", error.empty() ? std::strerror(errno) : error.c_str());
        return 1;
    }
    moestream_context *ctx = open_model(opt, "logits");
    if (!ctx) {
        std::fclose(out);
        return 1;
    }
    if (batch == 0) batch = int32_t(tokens.size());
    bool ok = write_logits(ctx, tokens, batch, all, out, out_path);
    moestream_close(ctx);
    if (std::fclose(out) != 0 && ok) {
        std::perror(out_path.c_str());
        ok = false;
    }
    if (ok && !output.commit(error)) {
        std::fprintf(stderr, "moestream logits: %s\n", error.c_str());
        ok = false;
    }
    return ok ? 0 : 1;
}

}  // namespace cli
