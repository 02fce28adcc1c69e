// C API of the random-weight model generator.
#include <cstddef>

#include "firewall.hpp"
#include "model/generator.hpp"

namespace {

// The layout before deepseek2_attn_kv_b ended at progress_user_data: that field keeps its default.
constexpr size_t kKvBOffset = offsetof(moestream_generate_params, deepseek2_attn_kv_b);
constexpr std::initializer_list<size_t> kEarlierGenerateSizes = {kKvBOffset};

moe::GeneratorConfig to_config(const moestream_generate_params *p) {
    moe::capi::require(p, "params");
    moe::capi::require_struct_size(p->struct_size, sizeof(moestream_generate_params), kEarlierGenerateSizes,
                                   "moestream_generate_params");
    moe::GeneratorConfig c;
    if (p->architecture) c.arch = p->architecture;
    if (p->preset) c.preset = p->preset;
    if (p->quant) c.quant = p->quant;
    c.n_layer = p->n_layer;
    c.n_embd = p->n_embd;
    c.n_head = p->n_head;
    c.n_head_kv = p->n_head_kv;
    c.head_dim = p->head_dim;
    c.n_expert = p->n_expert;
    c.n_expert_used = p->n_expert_used;
    c.n_ff_expert = p->n_ff_expert;
    c.n_vocab = p->n_vocab;
    c.seed = p->seed;
    if (p->struct_size > kKvBOffset) c.attn_kv_b = p->deepseek2_attn_kv_b != 0;
    return c;
}

}  // namespace

extern "C" {

MOESTREAM_API void moestream_generate_params_init(moestream_generate_params *params) {
    if (!params) return;
    *params = moestream_generate_params{};
    params->struct_size = sizeof(moestream_generate_params);
}

MOESTREAM_API int moestream_generate_model_size(const moestream_generate_params *params, uint64_t *bytes_out) {
    return moe::capi::guarded(__func__, [&] {
        moe::capi::require(bytes_out, "bytes_out");
        *bytes_out = moe::generated_model_size(to_config(params));
    });
}

MOESTREAM_API int moestream_generate_model(const moestream_generate_params *params, const char *path) {
    return moe::capi::guarded(__func__, [&] {
        moe::capi::require(path, "path");
        const moe::GeneratorConfig c = to_config(params);
        moestream_progress_fn fn = params->progress;
        void *user = params->progress_user_data;
        moe::generate_model(c, path, [fn, user](uint64_t done, uint64_t total) {
            if (fn) fn(done, total, user);
        });
    });
}

}  // extern "C"
