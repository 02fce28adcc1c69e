// moestream perplexity: a text file tokenized with the model's tokenizer (-f)
// or token ids from a file (--tokens), split into chunks of --ctx tokens; within
// each chunk every token after the first is predicted from the ones before it
// and scored. The tokens are stepped kPiece at a time with every token's
// logits (moestream_step_all_logits): the same logits as one token per step,
// but the output matrix and each routed expert are read once per piece.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>
#include <stdexcept>
#include <vector>

#include "cli_tokens.hpp"
#include "cli_util.hpp"
#include "input_choice.hpp"
#include "model_options.hpp"

namespace cli {
namespace {

// Tokens per step: the library's chunk, so that the logits buffer stays
// small (kPiece rows of n_vocab floats) and no chunk is split.
constexpr size_t kPiece = 64;

// What gives the text: a file of text (-f) or a file of token ids (--tokens).
enum class TextSource { text_file, token_file };

void print_help() {
    std::printf("usage: moestream perplexity -m MODEL (-f TEXT_FILE | --tokens FILE) [--ctx N] [model options]\n"
                "  -f, --file FILE          text, tokenized with the model's tokenizer\n"
                "  --tokens FILE            token ids instead (comma or whitespace separated)\n"
                "  --ctx N                  chunk length in tokens (at least 2)\n%s",
                kModelOptionsHelp);
}

// Natural-log probability the logits give `token`.
double log_probability(std::span<const float> logits, int32_t token) {
    double max = logits[0];
    for (float v : logits) max = std::max(max, double(v));
    double sum = 0.0;
    for (float v : logits) sum += std::exp(double(v) - max);
    return double(logits[size_t(token)]) - max - std::log(sum);
}

}  // namespace

int cmd_perplexity(const Args &given) {
    Args args = given;  // "--name=value" split as the loop reaches it
    ModelOptions opt;
    opt.min_ctx = 2;  // a chunk of one token predicts nothing: every chunk would score zero tokens
    InputChoice<TextSource> source("text", {{TextSource::text_file, "--file", "-f", true},
                                            {TextSource::token_file, "--tokens", nullptr, true}});
    bool help = false;
    try {
        read_options(args, [&](size_t &i) {
            const std::string &a = args[i];
            if (a == "--help" || a == "-h") {
                help = true;
                return false;
            }
            if (!parse_model_option(args, i, opt) && !source.parse(args, i))
                throw std::runtime_error(unknown_argument(a));
            return true;
        });
        if (help) {
            print_help();
            return 0;
        }
        if (opt.model_path.empty() || !source.given())
            throw std::runtime_error("-m and one of -f / --tokens are required");
    } catch (const std::exception &e) {
        return usage_error("perplexity", e.what());
    }
    std::vector<int32_t> tokens;
    std::string text;
    try {
        if (source.source() == TextSource::token_file) tokens = read_token_file(source.value());
        else text = read_input_file(source.value());
    } catch (const std::runtime_error &e) {
        std::fprintf(stderr, "moestream perplexity: %s\n", e.what());
        return 1;
    }
    moestream_context *ctx = open_model(opt, "perplexity");
    if (!ctx) return 1;
    if (source.source() == TextSource::text_file && !tokenize_text(ctx, text, true, false, tokens, "perplexity")) {
        moestream_close(ctx);
        return 1;
    }
    if (tokens.size() < 2) {
        std::fprintf(stderr, "moestream perplexity: need at least 2 tokens\n");
        moestream_close(ctx);
        return 1;
    }
    // The last token of a chunk is only scored, never stepped, so the library
    // would not see it: every id is checked here.
    if (!tokens_in_vocabulary(ctx, tokens, "perplexity")) {
        moestream_close(ctx);
        return 1;
    }
    const size_t n_ctx = size_t(moestream_n_ctx(ctx));
    if (n_ctx < 2) {
        std::fprintf(stderr, "moestream perplexity: the context holds %zu token; at least 2 are needed\n", n_ctx);
        moestream_close(ctx);
        return 1;
    }
    const size_t n_vocab = size_t(moestream_n_vocab(ctx));
    std::vector<float> logits(kPiece * n_vocab);
    double nll = 0.0;
    size_t scored = 0;
    for (size_t start = 0; start + 1 < tokens.size(); start += n_ctx) {
        const size_t end = std::min(tokens.size(), start + n_ctx);
        moestream_reset(ctx);
        // The chunk's last token is only predicted, never stepped.
        for (size_t piece = start; piece + 1 < end; piece += kPiece) {
            const size_t n = std::min(kPiece, end - 1 - piece);
            const int st = moestream_step_all_logits(ctx, &tokens[piece], int32_t(n), logits.data());
            if (st != MOESTREAM_OK) {
                report_error("perplexity", "moestream_step_all_logits", st);
                moestream_close(ctx);
                return 1;
            }
            for (size_t j = 0; j < n; ++j) {
                const size_t i = piece + j;
                const double lp = log_probability(std::span<const float>(&logits[j * n_vocab], n_vocab), tokens[i + 1]);
                // NaN logits (non-finite weights) would turn the whole result into "nan" with status 0.
                if (std::isnan(lp)) {
                    std::fprintf(stderr, "moestream perplexity: at token %zu, the logits hold NaN or +inf: the model's "
                                         "weights hold non-finite values\n", i + 1);
                    moestream_close(ctx);
                    return 1;
                }
                nll -= lp;
                ++scored;
            }
        }
        if (scored) std::fprintf(stderr, "[%zu tokens] ppl %.4f\n", scored, std::exp(nll / double(scored)));
    }
    std::printf("perplexity %.6f over %zu tokens\n", std::exp(nll / double(scored)), scored);
    moestream_close(ctx);
    return 0;
}

}  // namespace cli
