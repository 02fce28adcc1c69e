#include "cli_tokens.hpp"

#include <cstdio>

#include "cli_util.hpp"

namespace cli {

bool tokenize_text(moestream_context *ctx, const std::string &text, bool add_special, bool parse_special,
                   std::vector<int32_t> &out, const char *cmd) {
    out.resize(text.size() + 8);
    size_t n = 0;
    int st = moestream_tokenize(ctx, text.data(), text.size(), add_special, parse_special, out.data(), out.size(), &n);
    if (st == MOESTREAM_ERR_INVALID_ARGUMENT && n > out.size()) {
        out.resize(n);
        st = moestream_tokenize(ctx, text.data(), text.size(), add_special, parse_special, out.data(), out.size(), &n);
    }
    if (st != MOESTREAM_OK) {
        report_error(cmd, "moestream_tokenize", st);
        return false;
    }
    out.resize(n);
    return true;
}

bool token_piece(moestream_context *ctx, int32_t token, std::string &out, const char *cmd) {
    char buf[256];
    size_t n = 0;
    int st = moestream_token_to_piece(ctx, token, buf, sizeof buf, &n);
    if (st == MOESTREAM_OK) {
        out.assign(buf, n);
        return true;
    }
    if (st == MOESTREAM_ERR_INVALID_ARGUMENT && n > sizeof buf) {
        out.resize(n);
        st = moestream_token_to_piece(ctx, token, out.data(), out.size(), &n);
        if (st == MOESTREAM_OK) return true;
    }
    report_error(cmd, "moestream_token_to_piece", st);
    return false;
}

bool tokens_in_vocabulary(moestream_context *ctx, const std::vector<int32_t> &tokens, const char *cmd) {
    const int32_t n_vocab = moestream_n_vocab(ctx);
    for (size_t i = 0; i < tokens.size(); ++i) {
        if (tokens[i] >= 0 && tokens[i] < n_vocab) continue;
        std::fprintf(stderr, "moestream %s: token id %d at position %zu is not in the vocabulary (0..%d)\n", cmd,
                     tokens[i], i, n_vocab - 1);
        return false;
    }
    return true;
}

}  // namespace cli
