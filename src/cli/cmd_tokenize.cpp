// moestream tokenize: prints the token ids of a text (and, with --pieces,
// each token's text) using the model's tokenizer.
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli_tokens.hpp"
#include "cli_util.hpp"
#include "input_choice.hpp"
#include "model_options.hpp"

namespace cli {
namespace {

// What gives the text: the text itself (-p) or a file of it (-f).
enum class TextSource { text, file };

void print_help() {
    std::printf("usage: moestream tokenize -m MODEL (-p TEXT | -f FILE) [--no-bos] [--no-parse-special] [--pieces]\n"
                "                          [model options]\n"
                "  -p, --prompt TEXT        the text\n"
                "  -f, --file FILE          a file's text instead\n"
                "  --no-bos                 no beginning-of-sequence token\n"
                "  --no-parse-special       special-token text stays plain text\n"
                "  --pieces                 one token per line with its text\n%s",
                kModelOptionsHelp);
}

}  // namespace

int cmd_tokenize(const Args &given) {
    Args args = given;  // "--name=value" split as the loop reaches it
    ModelOptions opt;
    InputChoice<TextSource> source("text", {{TextSource::text, "--prompt", "-p"}, {TextSource::file, "--file", "-f", true}});
    bool add_special = true, parse_special = true, pieces = false;
    bool help = false;
    try {
        read_options(args, [&](size_t &i) {
            const std::string &a = args[i];
            if (a == "--help" || a == "-h") {
                help = true;
                return false;
            }
            if (parse_model_option(args, i, opt) || source.parse(args, i)) return true;
            if (a == "--no-bos") add_special = false;
            else if (a == "--no-parse-special") parse_special = false;
            else if (a == "--pieces") pieces = true;
            else throw std::runtime_error(unknown_argument(a));
            return true;
        });
        if (help) {
            print_help();
            return 0;
        }
        if (opt.model_path.empty() || !source.given()) throw std::runtime_error("-m and -p (or -f) are required");
    } catch (const std::exception &e) {
        return usage_error("tokenize", e.what());
    }
    std::string text;
    try {
        text = source.source() == TextSource::file ? read_input_file(source.value()) : source.value();
    } catch (const std::runtime_error &e) {
        std::fprintf(stderr, "moestream tokenize: %s\n", e.what());
        return 1;
    }
    moestream_context *ctx = open_model(opt, "tokenize");
    if (!ctx) return 1;
    std::vector<int32_t> ids;
    if (!tokenize_text(ctx, text, add_special, parse_special, ids, "tokenize")) {
        moestream_close(ctx);
        return 1;
    }
    std::string piece;
    for (size_t i = 0; i < ids.size(); ++i) {
        if (pieces) {
            if (!token_piece(ctx, ids[i], piece, "tokenize")) {
                moestream_close(ctx);
                return 1;
            }
            // Written by length: a piece may hold NUL bytes.
            std::printf("%d\t'", ids[i]);
            std::fwrite(piece.data(), 1, piece.size(), stdout);
            std::fputs("'\n", stdout);
        } else {
            std::printf("%s%d", i ? " " : "", ids[i]);
        }
    }
    if (!pieces) std::printf("\n");
    moestream_close(ctx);
    return 0;
}

}  // namespace cli
