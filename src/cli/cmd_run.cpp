// moestream run: greedy generation from a text prompt (-p, tokenized with the
// model's tokenizer; prints the generated text and stops at end of sequence)
// or from token ids (--tokens; prints the generated ids), then the prompt /
// generation speed.
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "cli_tokens.hpp"
#include "cli_util.hpp"
#include "model_options.hpp"

namespace cli {
namespace {

void print_help() {
    std::printf("usage: moestream run -m MODEL (-p TEXT | --tokens 1,2,3) [-n 32] [model options]\n"
                "  -p, --prompt TEXT        prompt text; prints the generated text, stops at end of sequence\n"
                "  --tokens LIST            prompt token ids instead; prints the generated ids\n"
                "  -n, --n-predict N        tokens to generate (default 32)\n%s",
                kModelOptionsHelp);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int cmd_run(const Args &args) {
    ModelOptions opt;
    std::vector<int32_t> prompt;
    std::string prompt_text;
    bool text_mode = false;
    int64_t n_gen = 32;
    try {
        for (size_t i = 0; i < args.size(); ++i) {
            const std::string &a = args[i];
            if (a == "--help" || a == "-h") {
                print_help();
                return 0;
            }
            if (parse_model_option(args, i, opt)) continue;
            if (a == "--tokens") prompt = parse_token_list(option_value(args, i));
            else if (a == "-p" || a == "--prompt") prompt_text = option_value(args, i), text_mode = true;
            else if (a == "-n" || a == "--n-predict") n_gen = int_option(option_value(args, i), a.c_str(), 0, std::numeric_limits<int32_t>::max());
            else throw std::runtime_error("unknown option '" + a + "'");
        }
        if (opt.model_path.empty() || prompt.empty() == !text_mode)
            throw std::runtime_error("-m and one of -p / --tokens are required");
    } catch (const std::exception &e) {
        return usage_error("run", e.what());
    }
    moestream_context *ctx = open_model(opt, "run");
    if (!ctx) return 1;
    if (text_mode && !tokenize_text(ctx, prompt_text, true, true, prompt, "run")) {
        moestream_close(ctx);
        return 1;
    }
    if (prompt.empty()) {
        std::fprintf(stderr, "moestream run: the prompt has no tokens\n");
        moestream_close(ctx);
        return 1;
    }
    const int32_t eos = text_mode ? moestream_token_eos(ctx) : -1;
    std::string piece;
    std::vector<float> logits(size_t(moestream_n_vocab(ctx)));
    auto t0 = std::chrono::steady_clock::now();
    int st = moestream_step(ctx, prompt.data(), int32_t(prompt.size()), logits.data());
    if (st != MOESTREAM_OK) {
        report_error("run", "moestream_step", st);
        moestream_close(ctx);
        return 1;
    }
    const double prompt_s = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    int64_t generated = 0;
    for (; generated < n_gen; ++generated) {
        int32_t next = greedy_token(logits);
        if (next < 0) {
            std::printf("\n");
            std::fprintf(stderr, "moestream run: after %lld generated tokens, %s\n", (long long)generated, kNoGreedyToken);
            moestream_close(ctx);
            return 1;
        }
        if (text_mode) {
            if (next == eos) break;
            if (!token_piece(ctx, next, piece, "run")) {
                moestream_close(ctx);
                return 1;
            }
            std::fwrite(piece.data(), 1, piece.size(), stdout);
        } else {
            std::printf("%d%s", next, generated + 1 < n_gen ? " " : "");
        }
        // Output that cannot be written (a reader gone while SIGPIPE is
        // ignored, a full disk) ends the run: the tokens to come would reach no one.
        if (std::fflush(stdout) != 0) {
            std::fprintf(stderr, "moestream run: cannot write output: %s\n", std::strerror(errno));
            std::clearerr(stdout);  // reported, with its cause: main's final check need not repeat it
            moestream_close(ctx);
            return 1;
        }
        if (generated + 1 == n_gen) {
            ++generated;
            break;
        }
        st = moestream_step(ctx, &next, 1, logits.data());
        if (st != MOESTREAM_OK) {
            std::printf("\n");
            report_error("run", "moestream_step", st);
            moestream_close(ctx);
            return 1;
        }
    }
    const double gen_s = seconds_since(t0);
    std::printf("\n");
    std::fflush(stdout);
    std::fprintf(stderr, "prompt: %zu tokens in %.3f s (%.2f tok/s); generated %lld tokens in %.3f s (%.2f tok/s)\n",
                 prompt.size(), prompt_s, prompt_s > 0 ? double(prompt.size()) / prompt_s : 0.0,
                 static_cast<long long>(generated), gen_s,
                 gen_s > 0 && generated > 1 ? double(generated - 1) / gen_s : 0.0);
    moestream_close(ctx);
    return 0;
}

}  // namespace cli
