// Sampler handles: moestream_sampler_* and moestream_sample.
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <span>

#include "firewall.hpp"
#include "sampler_handle.hpp"

namespace {

// The layout before the penalties ended at seed: a caller passing its size
// gets the penalties off (SamplerParams' defaults), its bytes beyond are not read.
constexpr size_t kPenaltiesOffset = offsetof(moestream_sampler_params, repeat_penalty);
constexpr std::initializer_list<size_t> kEarlierSamplerParamsSizes = {kPenaltiesOffset};
static_assert(sizeof(void *) != 8 || kPenaltiesOffset == 32, "the earlier layout was 32 bytes on 64-bit targets");
static_assert(moe::kMaxPenaltyLastN == MOESTREAM_SAMPLER_MAX_PENALTY_LAST_N);

void require_sampler_params_size(size_t given) {
    moe::capi::require_struct_size(given, sizeof(moestream_sampler_params), kEarlierSamplerParamsSizes,
                                   "moestream_sampler_params");
}

moe::SamplerParams from_c(const moestream_sampler_params &c) {
    moe::SamplerParams p;
    p.temperature = c.temperature;
    p.top_k = c.top_k;
    p.top_p = c.top_p;
    p.min_p = c.min_p;
    p.seed = c.seed;
    if (c.struct_size > kPenaltiesOffset) {
        p.repeat_penalty = c.repeat_penalty;
        p.presence_penalty = c.presence_penalty;
        p.frequency_penalty = c.frequency_penalty;
        p.penalty_last_n = c.penalty_last_n;
    }
    return p;
}

// Every field of the current layout, struct_size = sizeof: what
// moestream_sampler_params_init writes, and the image moestream_sampler_params_get
// copies the caller's struct_size bytes of.
moestream_sampler_params to_c(const moe::SamplerParams &p) {
    moestream_sampler_params c{};
    c.struct_size = sizeof(moestream_sampler_params);
    c.temperature = p.temperature;
    c.top_k = p.top_k;
    c.top_p = p.top_p;
    c.min_p = p.min_p;
    c.seed = p.seed;
    c.repeat_penalty = p.repeat_penalty;
    c.presence_penalty = p.presence_penalty;
    c.frequency_penalty = p.frequency_penalty;
    c.penalty_last_n = p.penalty_last_n;
    return c;
}

}  // namespace

extern "C" {

MOESTREAM_API void moestream_sampler_params_init(moestream_sampler_params *params) {
    if (params) *params = to_c(moe::SamplerParams{});
}

MOESTREAM_API int moestream_sampler_new(const moestream_sampler_params *params, moestream_sampler **out) {
    if (out) *out = nullptr;
    return moe::capi::guarded(__func__, [&] {
        moe::capi::require(out, "out");
        moe::capi::require(params, "params");
        require_sampler_params_size(params->struct_size);
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
        require_sampler_params_size(out->struct_size);
        moe::capi::SamplerUse use(sampler);
        // A caller built against the earlier layout gets the fields up to seed;
        // not a byte past its struct is written.
        const size_t given = out->struct_size;
        moestream_sampler_params image = to_c(use->params());
        image.struct_size = given;
        std::memcpy(out, &image, given);
    });
}

MOESTREAM_API int moestream_sampler_accept(moestream_sampler *sampler, const int32_t *tokens, int32_t n) {
    return moe::capi::guarded(__func__, [&] {
        moe::capi::require(sampler, "sampler");
        if (n < 0) moe::fail(moe::Status::invalid_argument, "n is %d; expected >= 0", n);
        if (n > 0) moe::capi::require(tokens, "tokens");
        moe::capi::SamplerUse use(sampler);
        use->accept(std::span<const int32_t>(tokens, static_cast<size_t>(n)));
    });
}

MOESTREAM_API int moestream_sampler_reset(moestream_sampler *sampler) {
    return moe::capi::guarded(__func__, [&] {
        moe::capi::SamplerUse use(sampler);
        use->reset();
    });
}

}  // extern "C"
