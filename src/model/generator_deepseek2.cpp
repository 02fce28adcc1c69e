// The generator's deepseek2 models: latent attention (MLA, absorbed form),
// leading dense layers, routed experts with sigmoid or softmax gating and
// ungated shared experts, with the header keys of converted DeepSeek files.
#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "kernels/kernels.hpp"
#include "model/generator_parts.hpp"

namespace moe::gen {
namespace {

struct Deepseek2Preset {
    const char *name;
    Deepseek2Shape shape;
};

// deepseek2-tiny is DeepSeek-V3's layout scaled down (q_lora path, sigmoid
// gating with a selection bias, 4 groups of which 2 are used, weights
// renormalised then scaled by 2.5, 1 shared expert); deepseek-v2-lite is
// DeepSeek-V2-Lite's (one attn_q projection, softmax gating without groups or
// renormalisation, 2 shared experts). Both carry V2-Lite's YaRN (factor 40 of
// 4096 positions, mscale_all_dim 0.707).
// {dense lead, dense n_ff, shared, q_lora, kv_lora, qk_rope, v_head, groups, groups used,
//  sigmoid, norm, scale, yarn factor, mscale_all_dim, original context}
constexpr Deepseek2Preset kPresets[] = {
    {"deepseek2-tiny", {1, 512, 1, 128, 128, 32, 32, 4, 2, true, true, 2.5f, 40.0f, 0.707f, 4096}},
    {"deepseek-v2-lite", {1, 10944, 2, 0, 512, 64, 128, 0, 0, false, false, 1.0f, 40.0f, 0.707f, 4096}},
};

// Selection biases only reorder experts whose probabilities lie within a few
// hundredths: small against the routers' spread, so routing stays clear.
constexpr float kSelectionBiasSigma = 0.01f;

}  // namespace

const Deepseek2Shape *deepseek2_preset(const std::string &preset) {
    for (const Deepseek2Preset &p : kPresets)
        if (preset == p.name) return &p.shape;
    return nullptr;
}

void deepseek2_resolve(GeneratorConfig &c) {
    Deepseek2Shape &d = c.deepseek2;
    // A shortened model keeps one layer of routed experts, the part the
    // generator's models exist to stream (--layers 1: no dense lead).
    d.n_dense_lead = std::min(d.n_dense_lead, c.n_layer - 1);
    if (c.n_head_kv != 1)
        fail(Status::invalid_argument, "generator: deepseek2 has one latent KV head (n_head_kv is %d)", c.n_head_kv);
    if (c.head_dim <= d.qk_rope || (c.head_dim - d.qk_rope) % 32)
        fail(Status::invalid_argument,
             "generator: deepseek2 head_dim %d must exceed qk_rope %d by a multiple of 32 (the qk_nope part)",
             c.head_dim, d.qk_rope);
    if (d.n_group > 1) {
        const int32_t per = c.n_expert / d.n_group;
        if (c.n_expert % d.n_group || c.n_expert_used > per * d.n_group_used)
            fail(Status::invalid_argument,
                 "generator: deepseek2 n_expert %d in %d groups of which %d are used cannot give n_expert_used %d",
                 c.n_expert, d.n_group, d.n_group_used, c.n_expert_used);
    }
}

void deepseek2_layer_specs(const GeneratorConfig &c, const QuantMix &q, int32_t layer, std::vector<TensorSpec> &t) {
    const Deepseek2Shape &d = c.deepseek2;
    const std::string p = "blk." + std::to_string(layer) + ".";
    const int64_t E = c.n_embd, H = c.n_head, nope = c.head_dim - d.qk_rope, kv = d.kv_lora_rank;
    const int64_t q_rows = H * c.head_dim, v_rows = H * d.v_head;
    auto spec = [&](const char *name, GgmlType type, std::vector<int64_t> ne, float gain = 1.0f) {
        const int64_t row = ne[0];
        return TensorSpec{p + name, fit(type, row), std::move(ne), Init::normal, gain * inv_sqrt(row)};
    };
    auto matrix = [&](const char *name, GgmlType type, std::vector<int64_t> ne, float gain = 1.0f) {
        t.push_back(spec(name, type, std::move(ne), gain));
    };
    auto ones = [&](const char *name, int64_t n) { t.push_back({p + name, GgmlType::F32, {n}, Init::ones, 0}); };
    ones("attn_norm.weight", E);
    if (d.q_lora_rank > 0) {
        matrix("attn_q_a.weight", q.attn_qko, {E, d.q_lora_rank});
        ones("attn_q_a_norm.weight", d.q_lora_rank);
        matrix("attn_q_b.weight", q.attn_qko, {d.q_lora_rank, q_rows});
    } else {
        matrix("attn_q.weight", q.attn_qko, {E, q_rows});
    }
    matrix("attn_kv_a_mqa.weight", q.attn_qko, {E, kv + d.qk_rope});
    ones("attn_kv_a_norm.weight", kv);
    TensorSpec k_b = spec("attn_k_b.weight", q.attn_qko, {nope, kv, H});
    TensorSpec v_b = spec("attn_v_b.weight", q.attn_v, {kv, d.v_head, H});
    if (c.attn_kv_b) {
        t.push_back({p + "attn_kv_b.weight", GgmlType::F32, {kv, H * (nope + d.v_head)}, Init::joint_kv_b, 0,
                     {std::move(k_b), std::move(v_b)}});
    } else {
        t.push_back(std::move(k_b));
        t.push_back(std::move(v_b));
    }
    matrix("attn_output.weight", q.attn_qko, {v_rows, E}, kAttnOutputScale);
    ones("ffn_norm.weight", E);
    if (layer < d.n_dense_lead) {
        matrix("ffn_gate.weight", q.exp_gate_up, {E, d.n_ff_dense});
        matrix("ffn_up.weight", q.exp_gate_up, {E, d.n_ff_dense});
        matrix("ffn_down.weight", q.exp_down, {d.n_ff_dense, E});
        return;
    }
    const int64_t F = c.n_ff_expert, X = c.n_expert, FS = F * d.n_expert_shared;
    t.push_back({p + "ffn_gate_inp.weight", GgmlType::F32, {E, X}, Init::router, kRouterGain * inv_sqrt(E)});
    if (d.sigmoid) t.push_back({p + "exp_probs_b.bias", GgmlType::F32, {X}, Init::normal, kSelectionBiasSigma});
    matrix("ffn_gate_exps.weight", q.exp_gate_up, {E, F, X});
    matrix("ffn_up_exps.weight", q.exp_gate_up, {E, F, X});
    matrix("ffn_down_exps.weight", q.exp_down, {F, E, X});
    if (FS > 0) {
        matrix("ffn_gate_shexp.weight", q.exp_gate_up, {E, FS});
        matrix("ffn_up_shexp.weight", q.exp_gate_up, {E, FS});
        matrix("ffn_down_shexp.weight", q.exp_down, {FS, E});
    }
}

void deepseek2_header(gguf::GgufWriter &w, const GeneratorConfig &c) {
    const Deepseek2Shape &d = c.deepseek2;
    const std::string a = "deepseek2.";
    auto u32 = [&](const char *key, int64_t v) { w.add_u32(a + key, static_cast<uint32_t>(v)); };
    u32("feed_forward_length", d.n_ff_dense);
    u32("leading_dense_block_count", d.n_dense_lead);
    if (c.attn_kv_b) {
        // As converters wrote them before the absorbed form: multi-head
        // attention of qk_nope + qk_rope keys and v_head values per head.
        u32("attention.head_count_kv", c.n_head);
        u32("attention.key_length", c.head_dim);
        u32("attention.value_length", d.v_head);
    } else {
        // The absorbed form caches one row of kv_lora latent values and the rotary part.
        u32("attention.head_count_kv", c.n_head_kv);
        u32("attention.key_length", d.kv_lora_rank + d.qk_rope);
        u32("attention.value_length", d.kv_lora_rank);
        u32("attention.key_length_mla", c.head_dim);
        u32("attention.value_length_mla", d.v_head);
    }
    u32("attention.kv_lora_rank", d.kv_lora_rank);
    if (d.q_lora_rank > 0) u32("attention.q_lora_rank", d.q_lora_rank);
    u32("rope.dimension_count", d.qk_rope);
    w.add_f32(a + "rope.freq_base", 10000.0f);
    w.add_string(a + "rope.scaling.type", "yarn");
    w.add_f32(a + "rope.scaling.factor", d.yarn_factor);
    u32("rope.scaling.original_context_length", d.yarn_orig_ctx);
    w.add_f32(a + "rope.scaling.yarn_log_multiplier", 0.1f * d.yarn_mscale_all_dim);  // as converters store it
    w.add_f32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
    u32("expert_shared_count", d.n_expert_shared);
    u32("expert_gating_func", d.sigmoid ? 2 : 1);
    w.add_bool(a + "expert_weights_norm", d.weights_norm);
    w.add_f32(a + "expert_weights_scale", d.weights_scale);
    u32("expert_group_count", d.n_group > 1 ? d.n_group : 1);
    u32("expert_group_used_count", d.n_group > 1 ? d.n_group_used : 1);
}

JointKvB::JointKvB(const GeneratorConfig &c, const TensorSpec &kv_b)
    : k_b_(kv_b.parts.at(0)), v_b_(kv_b.parts.at(1)), nope_(k_b_.ne[0]), v_head_(v_b_.ne[1]), kv_lora_(v_b_.ne[0]),
      k_rng_(tensor_rng(c, k_b_.name)), v_rng_(tensor_rng(c, v_b_.name)), k_(size_t(nope_ * kv_lora_)),
      v_(size_t(v_head_ * kv_lora_)) {}

void JointKvB::next_head(float *out) {
    // One head of each split tensor, drawn as the split layout draws it
    // (its blocks in order from the tensor's own generator), then dequantised.
    auto draw = [this](const TensorSpec &t, Rng &rng, std::vector<float> &values) {
        const TypeTraits &tr = type_traits(t.type);
        const uint64_t n_blocks = values.size() / tr.block_elems;
        blocks_.resize(size_t(n_blocks * tr.block_bytes));
        fill_blocks(t.type, blocks_.data(), n_blocks, t.sigma, rng);
        kernels::dequantize_row(t.type, blocks_.data(), values.data(), int64_t(values.size()));
    };
    draw(k_b_, k_rng_, k_);
    draw(v_b_, v_rng_, v_);
    // Key row d: column d of the head's kv_lora rows of attn_k_b; then the attn_v_b rows.
    for (int64_t d = 0; d < nope_; ++d)
        for (int64_t r = 0; r < kv_lora_; ++r) out[d * kv_lora_ + r] = k_[size_t(r * nope_ + d)];
    std::copy(v_.begin(), v_.end(), out + nope_ * kv_lora_);
}

}  // namespace moe::gen
