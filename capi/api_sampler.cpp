// Sampler handles: moestream_sampler_* and moestream_sample.
#include <span>

#include "firewall.hpp"
#include "sampler_handle.hpp"

namespace {

moe::SamplerParams from_c(const moestream_sampler_params &c) {
    moe::SamplerParams p;
    p.temperature = c.temperature;
    p.top_k = c.top_k;
    p.top_p = c.top_p;
    p.min_p = c.min_p;
    p.seed = c.seed;
    return p;
}

}  // namespace

extern "C" {

MOESTREAM_API void moestream_sampler_params_init(moestream_sampler_params *params) {
    if (!params) return;
    const moe::SamplerParams d;
    *params = moestream_sampler_params{};
    params->struct_size = sizeof(moestream_sampler_params);
    params->temperature = d.temperature;
    params->top_k = d.top_k;
    params->top_p = d.top_p;
    params->min_p = d.min_p;
    params->seed = d.seed;
}

MOESTREAM_API int moestream_sampler_new(const moestream_sampler_params *params, moestream_sampler **out) {
    if (out) *out = nullptr;
    return moe::capi::guarded(__func__, [&] {
        moe::capi::require(out, "out");
        moe::capi::require(params, "params");
        moe::capi::require_struct_size(params->struct_size, sizeof(moestream_sampler_params),
                                       "moestream_sampler_params");
        *out = new moestream_sampler(from_c(*params));
    });
}

MOESTREAM_API void moestream_sampler_free(moestream_sampler *sampler) {
    moe::capi::guarded(__func__, [&] {
        if (!sampler) return;
        // As moestream_close: a call inside the sampler keeps it allocated.
        if (sampler->in_use.test_and_set(std::memory_order_acquire))
            moe::fail(moe::Status::busy, "the sampler is in use by a call in progress; it stays allocated");
        delete sampler;
    });
}

MOESTREAM_API int moestream_sample(moestream_sampler *sampler, const float *logits, int32_t n_vocab,
                                   int32_t *token_out) {
    return moe::capi::guarded(__func__, [&] {
        moe::capi::require(sampler, "sampler");
        moe::capi::require(logits, "logits");
        moe::capi::require(token_out, "token_out");
        if (n_vocab <= 0) moe::fail(moe::Status::invalid_argument, "n_vocab is %d; expected > 0", n_vocab);
        moe::capi::SamplerUse use(sampler);
        *token_out = use->sample(std::span<const float>(logits, static_cast<size_t>(n_vocab)));
    });
}

MOESTREAM_API int moestream_sampler_params_get(const moestream_sampler *sampler, moestream_sampler_params *out) {
    return moe::capi::guarded(__func__, [&] {
        moe::capi::require(out, "out");
        moe::capi::require_struct_size(out->struct_size, sizeof(moestream_sampler_params), "moestream_sampler_params");
        moe::capi::SamplerUse use(sampler);
        const moe::SamplerParams &p = use->params();
        out->temperature = p.temperature;
        out->top_k = p.top_k;
        out->top_p = p.top_p;
        out->min_p = p.min_p;
        out->seed = p.seed;
    });
}

}  // extern "C"
