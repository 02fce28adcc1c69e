// Tokenizer entry points. This build has no tokenizer: every call reports
// UNSUPPORTED (or -1 for the id queries) instead of guessing.
#include "context_handle.hpp"
#include "firewall.hpp"

namespace {
void no_tokenizer(const moestream_context *ctx) {
    if (!ctx || !ctx->ctx) moe::fail(moe::Status::invalid_argument, "context is NULL");
    moe::fail(moe::Status::unsupported, "this build has no tokenizer; pass token ids instead");
}
}  // namespace

extern "C" {

MOESTREAM_API int moestream_tokenize(const moestream_context *ctx, const char *, size_t, int32_t, int32_t,
                                     int32_t *, size_t, size_t *n_out) {
    if (n_out) *n_out = 0;
    return moe::capi::guarded("moestream_tokenize", [&] { no_tokenizer(ctx); });
}

MOESTREAM_API int moestream_token_to_piece(const moestream_context *ctx, int32_t, char *, size_t, size_t *n_out) {
    if (n_out) *n_out = 0;
    return moe::capi::guarded("moestream_token_to_piece", [&] { no_tokenizer(ctx); });
}

MOESTREAM_API int32_t moestream_token_bos(const moestream_context *) { return -1; }
MOESTREAM_API int32_t moestream_token_eos(const moestream_context *) { return -1; }

}  // extern "C"
