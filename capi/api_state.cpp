// State save and load (docs/state-format.md), with or without a sampler.
#include <optional>
#include <string>

#include "context_handle.hpp"
#include "firewall.hpp"
#include "sampler_handle.hpp"

namespace {

// Claims the context and, when given, the sampler for one save or load.
struct StateUse {
    StateUse(const moestream_context *ctx, const moestream_sampler *s) : context(ctx) {
        if (s) sampler.emplace(s);
    }
    moe::Sampler *sampler_or_null() const { return sampler ? &**sampler : nullptr; }
    moe::capi::ContextUse context;
    std::optional<moe::capi::SamplerUse> sampler;
};

int save(const char *function, moestream_context *ctx, const moestream_sampler *sampler, const char *path) {
    return moe::capi::guarded(function, [&] {
        StateUse use(ctx, sampler);
        moe::capi::require(path, "path");
        if (ctx->log.enabled(MOESTREAM_LOG_DEBUG))
            ctx->log.write(MOESTREAM_LOG_DEBUG, "saving state (%d tokens%s) to %s", use.context->n_past(),
                           sampler ? ", sampler" : "", path);
        const std::string warning = use.context->save_state(path, use.sampler_or_null());
        if (!warning.empty()) ctx->log.write(MOESTREAM_LOG_WARN, "%s: %s", function, warning.c_str());
    });
}

int load(const char *function, moestream_context *ctx, moestream_sampler *sampler, const char *path) {
    return moe::capi::guarded(function, [&] {
        StateUse use(ctx, sampler);
        moe::capi::require(path, "path");
        if (ctx->log.enabled(MOESTREAM_LOG_DEBUG))
            ctx->log.write(MOESTREAM_LOG_DEBUG, "loading state%s from %s", sampler ? " and sampler" : "", path);
        use.context->load_state(path, use.sampler_or_null());
    });
}

}  // namespace

extern "C" {

MOESTREAM_API int moestream_state_save(moestream_context *ctx, const char *path) {
    return save("moestream_state_save", ctx, nullptr, path);
}

MOESTREAM_API int moestream_state_load(moestream_context *ctx, const char *path) {
    return load("moestream_state_load", ctx, nullptr, path);
}

MOESTREAM_API int moestream_state_save_with_sampler(moestream_context *ctx, const moestream_sampler *sampler,
                                                    const char *path) {
    return save("moestream_state_save_with_sampler", ctx, sampler, path);
}

MOESTREAM_API int moestream_state_load_with_sampler(moestream_context *ctx, moestream_sampler *sampler,
                                                    const char *path) {
    return load("moestream_state_load_with_sampler", ctx, sampler, path);
}

}  // extern "C"
