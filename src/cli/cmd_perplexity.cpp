// moestream perplexity: a text file tokenized with the model's tokenizer (-f)
// or token ids from a file (--tokens), split into chunks of --ctx tokens; within each chunk every token after the first is predicted from the
// ones before it (one token per step) and scored.
#include <cmath>
#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "cli_tokens.hpp"
#include "model_options.hpp"

namespace cli {

int cmd_perplexity(const Args &args) {
    ModelOptions opt;
    std::string token_file, text_file;
    try {
        for (size_t i = 0; i < args.size(); ++i) {
            const std::string &a = args[i];
            if (a == "--help" || a == "-h") {
                std::fprintf(stderr, "usage: moestream perplexity -m MODEL (-f TEXT_FILE | --tokens FILE) [--ctx N] [model options]\n");
                return 0;
            }
            if (parse_model_option(args, i, opt)) continue;
            if (a == "--tokens") token_file = option_value(args, i);
            else if (a == "-f" || a == "--file") text_file = option_value(args, i);
            else throw std::runtime_error("unknown option '" + a + "'");
        }
        if (opt.model_path.empty() || token_file.empty() == text_file.empty())
            throw std::runtime_error("-m and one of -f / --tokens are required");
    } catch (const std::exception &e) {
        std::fprintf(stderr, "moestream perplexity: %s\n", e.what());
        return 2;
    }
    std::vector<int32_t> tokens;
    std::string text;
    try {
        if (!token_file.empty()) tokens = read_token_file(token_file);
        else text = read_text_file(text_file);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "moestream perplexity: %s\n", e.what());
        return 1;
    }
    moestream_context *ctx = open_model(opt);
    if (!ctx) return 1;
    if (!text_file.empty() && !tokenize_text(ctx, text, true, false, tokens, "perplexity")) {
        moestream_close(ctx);
        return 1;
    }
    if (tokens.size() < 2) {
        std::fprintf(stderr, "moestream perplexity: need at least 2 tokens\n");
        moestream_close(ctx);
        return 1;
    }
    const size_t n_ctx = size_t(moestream_n_ctx(ctx));
    std::vector<float> logits(size_t(moestream_n_vocab(ctx)));
    double nll = 0.0;
    size_t scored = 0;
    for (size_t start = 0; start + 1 < tokens.size(); start += n_ctx) {
        const size_t end = std::min(tokens.size(), start + n_ctx);
        moestream_reset(ctx);
        for (size_t i = start; i + 1 < end; ++i) {
            const int st = moestream_step(ctx, &tokens[i], 1, logits.data());
            if (st != MOESTREAM_OK) {
                report_error("perplexity", "moestream_step", st);
                moestream_close(ctx);
                return 1;
            }
            double max = logits[0];
            for (float v : logits) max = std::max(max, double(v));
            double sum = 0.0;
            for (float v : logits) sum += std::exp(double(v) - max);
            nll -= double(logits[size_t(tokens[i + 1])]) - max - std::log(sum);
            ++scored;
        }
        std::fprintf(stderr, "[%zu tokens] ppl %.4f\n", scored, std::exp(nll / double(scored)));
    }
    std::printf("perplexity %.6f over %zu tokens\n", std::exp(nll / double(scored)), scored);
    moestream_close(ctx);
    return 0;
}

}  // namespace cli
