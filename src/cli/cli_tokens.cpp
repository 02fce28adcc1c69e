#include "cli_tokens.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "model_options.hpp"

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

std::string read_text_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open '" + path + "': " + std::strerror(errno));
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) throw std::runtime_error("cannot read '" + path + "'");
    return ss.str();
}

}  // namespace cli
