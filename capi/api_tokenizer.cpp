// Tokenizer entry points over the tokenizer built at open. The tokenizer is
// immutable, so these calls do not claim the context and may run beside a step.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "context_handle.hpp"
#include "firewall.hpp"
#include "tokenizer/vocab.hpp"

namespace {

using moe::capi::guarded;

const moe::tok::Tokenizer &require_tokenizer(const moestream_context *ctx) {
    if (!ctx || !ctx->ctx) moe::fail(moe::Status::invalid_argument, "context is NULL");
    if (!ctx->tokenizer) moe::fail(ctx->tokenizer_status, "%s", ctx->tokenizer_error.c_str());
    return *ctx->tokenizer;
}

}  // namespace

namespace moe::capi {

void attach_tokenizer(moestream_context &handle) {
    const Model &model = handle.ctx->model();
    if (!tok::Vocab::present_in(model.file())) {
        handle.tokenizer_status = Status::unsupported;
        handle.tokenizer_error = "the model has no tokenizer (no tokenizer.ggml.model); pass token ids instead";
        return;
    }
    try {
        auto t = tok::Tokenizer::from_gguf(model.file(), handle.log);
        const int32_t n_vocab = model.hparams().n_vocab;
        if (t->n_tokens() > n_vocab)
            fail(Status::bad_format, "%s: the tokenizer has %d tokens but the model's vocabulary has %d rows",
                 model.file().path().c_str(), t->n_tokens(), n_vocab);
        handle.tokenizer = std::move(t);
    } catch (const Error &e) {
        // The model still runs on token ids; the tokenizer calls report why there is no tokenizer.
        handle.tokenizer_status = e.status();
        handle.tokenizer_error = std::string("the model's tokenizer cannot be used: ") + e.what();
        handle.log.write(MOESTREAM_LOG_WARN, "%s", handle.tokenizer_error.c_str());
    }
}

}  // namespace moe::capi

extern "C" {

MOESTREAM_API int moestream_tokenize(const moestream_context *ctx, const char *text, size_t text_len,
                                     int32_t add_special, int32_t parse_special, int32_t *tokens_out,
                                     size_t capacity, size_t *n_out) {
    if (n_out) *n_out = 0;
    return guarded("moestream_tokenize", [&] {
        const moe::tok::Tokenizer &tok = require_tokenizer(ctx);
        moe::capi::require(n_out, "n_out");
        if (!text && text_len) moe::fail(moe::Status::invalid_argument, "text is NULL but text_len is %zu", text_len);
        if (!tokens_out && capacity)
            moe::fail(moe::Status::invalid_argument, "tokens_out is NULL but capacity is %zu", capacity);
        thread_local std::vector<int32_t> ids;
        tok.tokenize(std::string_view(text ? text : "", text_len), add_special != 0, parse_special != 0, ids);
        *n_out = ids.size();
        if (ids.size() > capacity)
            moe::fail(moe::Status::invalid_argument, "%zu tokens do not fit in capacity %zu", ids.size(), capacity);
        std::copy(ids.begin(), ids.end(), tokens_out);
    });
}

MOESTREAM_API int moestream_token_to_piece(const moestream_context *ctx, int32_t token, char *buf, size_t capacity,
                                           size_t *n_out) {
    if (n_out) *n_out = 0;
    return guarded("moestream_token_to_piece", [&] {
        const moe::tok::Tokenizer &tok = require_tokenizer(ctx);
        moe::capi::require(n_out, "n_out");
        if (!buf && capacity) moe::fail(moe::Status::invalid_argument, "buf is NULL but capacity is %zu", capacity);
        thread_local std::string piece;
        piece.clear();
        // Rows of the model's output past the tokenizer's list (a vocabulary
        // padded to a round size) can be sampled and have no text.
        const bool padding = token >= tok.n_tokens() && token < ctx->ctx->model().hparams().n_vocab;
        if (!padding) tok.append_piece(token, piece);
        *n_out = piece.size();
        if (piece.size() > capacity)
            moe::fail(moe::Status::invalid_argument, "token %d is %zu bytes; capacity is %zu", token, piece.size(),
                      capacity);
        if (!piece.empty()) std::memcpy(buf, piece.data(), piece.size());
    });
}

MOESTREAM_API int32_t moestream_token_bos(const moestream_context *ctx) {
    return ctx && ctx->tokenizer ? ctx->tokenizer->bos() : -1;
}

MOESTREAM_API int32_t moestream_token_eos(const moestream_context *ctx) {
    return ctx && ctx->tokenizer ? ctx->tokenizer->eos() : -1;
}

}  // extern "C"
