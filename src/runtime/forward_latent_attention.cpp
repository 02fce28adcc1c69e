// Latent attention (MLA, DeepSeek-V2/V3) in the absorbed form: the cache
// keeps one row per token, the RMS-normalised kv latent (kv_lora_rank values)
// followed by the rotated shared key part (n_rot values); every query head
// attends to it with its non-rotary part first mapped into latent space
// through its slice of attn_k_b, and the latent result of each head is
// mapped back through its slice of attn_v_b before the output projection.
// The queries come from attn_q, or from attn_q_b over the RMS-normalised
// q_lora latent attn_q_a produces. RoPE (the architecture's pairing) touches
// only the rotary parts. Both per-head maps run all heads in one pass (head_linear.hpp).
#include <algorithm>

#include "model/rms_norm.hpp"
#include "model/rope.hpp"
#include "runtime/forward_pass.hpp"
#include "runtime/head_linear.hpp"

namespace moe {

void ForwardPass::latent_attention_block(int32_t layer, int32_t n_tokens, int32_t n_past) {
    const LayerWeights &lw = model_.layer(layer);
    const RopeType rope_type = model_.traits().rope_type;
    const size_t E = size_t(n_embd_);
    const int32_t n_head = hp_.n_head, n_rot = hp_.n_rot, kv_lora = hp_.kv_lora_rank;
    const int32_t q_head = hp_.head_dim_k_mla, nope = q_head - n_rot, v_head = hp_.head_dim_v_mla;
    const int32_t dk = hp_.head_dim_k;  // kv_lora + n_rot: an absorbed query head and the cached row
    const size_t q_row = size_t(n_head) * size_t(q_head), out_row = size_t(n_head) * size_t(v_head);
    for (int32_t t = 0; t < n_tokens; ++t)
        rms_norm(&x_[size_t(t) * E], lw.attn_norm.data(), &xn_[size_t(t) * E], n_embd_, hp_.rms_eps);

    // The shared latent row straight into k_ (its layout is the cache row's),
    // the queries from the same converted input where the types allow.
    linear_.prepare(lw.wkv_a.type, lw.wkv_a.cols, xn_.data(), E, n_tokens);
    linear_.multiply(lw.wkv_a, k_.data(), size_t(k_dim_));
    const MatrixView &wq_in = lw.wq_a ? lw.wq_a : lw.wq;
    if (!linear_.prepared_for(wq_in)) linear_.prepare(wq_in.type, wq_in.cols, xn_.data(), E, n_tokens);
    if (lw.wq_a) {
        const size_t q_lora = size_t(hp_.q_lora_rank);
        linear_.multiply(lw.wq_a, q_latent_.data(), q_lora);
        for (int32_t t = 0; t < n_tokens; ++t) {
            float *c = &q_latent_[size_t(t) * q_lora];
            rms_norm(c, lw.q_a_norm.data(), c, int64_t(q_lora), hp_.rms_eps);
        }
        linear_.run(lw.wq_b, q_latent_.data(), q_lora, n_tokens, q_full_.data(), q_row);
    } else {
        linear_.multiply(lw.wq, q_full_.data(), q_row);
    }
    experts_.progress();

    for (int32_t t = 0; t < n_tokens; ++t) {
        const float *cs = &rope_cs_[size_t(t) * size_t(n_rot)];
        float *k = &k_[size_t(t) * size_t(k_dim_)];
        rms_norm(k, lw.kv_a_norm.data(), k, kv_lora, hp_.rms_eps);
        rope_apply(rope_type, n_rot, cs, k + kv_lora);
        kv_.store(layer, n_past + t, k, nullptr);
        for (int32_t h = 0; h < n_head; ++h) {
            float *qf = &q_full_[size_t(t) * q_row + size_t(h) * size_t(q_head)];
            rope_apply(rope_type, n_rot, cs, qf + nope);
            // The rotary part follows the head's absorbed latent query.
            float *q = &q_[size_t(t) * size_t(q_dim_) + size_t(h) * size_t(dk)];
            std::copy(qf + nope, qf + q_head, q + kv_lora);
        }
    }
    // Absorption: head h's latent query = its attn_k_b slice (kv_lora rows of nope) . q_nope.
    const HeadSlices absorb{.w = &lw.wk_b, .n_head = n_head, .rows = kv_lora, .x = q_full_.data(),
                            .x_head = size_t(q_head), .x_token = q_row, .y = q_.data(), .y_head = size_t(dk),
                            .y_token = size_t(q_dim_)};
    multiply_heads(pool_, opt_.exact, absorb, n_tokens, mla_act_.data(), mla_act_.size());
    experts_.progress();

    attend(layer, n_tokens, n_past);

    experts_.progress();
    // Decompression: head h's value = its attn_v_b slice (v_head rows of kv_lora) . latent result.
    const HeadSlices decompress{.w = &lw.wv_b, .n_head = n_head, .rows = v_head, .x = attn_.data(),
                                .x_head = size_t(kv_lora), .x_token = size_t(o_dim_), .y = mla_out_.data(),
                                .y_head = size_t(v_head), .y_token = out_row};
    multiply_heads(pool_, opt_.exact, decompress, n_tokens, mla_act_.data(), mla_act_.size());
    linear_.run(lw.wo, mla_out_.data(), out_row, n_tokens, tmp_.data(), E);
    for (size_t i = 0, n = size_t(n_tokens) * E; i < n; ++i) x_[i] = tmp_[i] + x_[i];
}

}  // namespace moe
