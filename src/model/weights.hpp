// Views of the weights a forward pass reads. Matrices point into the GGUF
// mapping (never copied, never expanded); 1-D tensors (norms, biases) are
// small and are converted to f32 once at load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/ggml_types.hpp"
#include "model/expert_layout.hpp"

namespace moe {

// A 2-D weight matrix in GGUF layout: `rows` rows of `cols` elements each
// (ne[0] = cols, ne[1] = rows); y = W x has `rows` outputs.
struct MatrixView {
    const uint8_t *data = nullptr;
    GgmlType type = GgmlType::F32;
    int64_t cols = 0;
    int64_t rows = 0;
    size_t row_bytes = 0;

    explicit operator bool() const { return data != nullptr; }
    const uint8_t *row(int64_t r) const { return data + size_t(r) * row_bytes; }
    // Rows [first, first + n) as a matrix of their own: one head's slice of a
    // per-head 3-D tensor bound as one matrix of all heads' rows.
    MatrixView rows_from(int64_t first, int64_t n) const {
        MatrixView m = *this;
        m.data = row(first);
        m.rows = n;
        return m;
    }
};

// An f32 copy of a 1-D tensor; empty when the tensor is optional and absent.
using VectorF32 = std::vector<float>;

// The vector's values, or null for an absent optional tensor (kernels and
// steps take a null bias or table as none).
inline const float *data_or_null(const VectorF32 &v) { return v.empty() ? nullptr : v.data(); }

// How Q and K are normalised before RoPE.
enum class QkNorm : int32_t {
    none = 0,
    per_head = 1,  // RMSNorm over each head (weights of head_dim)
    full = 2,      // RMSNorm over the whole projected vector (weights of n_head*head_dim)
};

struct LayerWeights {
    VectorF32 attn_norm;
    MatrixView wq, wk, wv, wo;
    VectorF32 bq, bk, bv, bo;          // empty when the architecture has no bias
    VectorF32 q_norm, k_norm;          // empty without QK-norm
    VectorF32 attn_sinks;              // n_head softmax sink logits; empty without
    VectorF32 ffn_norm;
    MatrixView router;                 // ffn_gate_inp: n_embd -> n_expert
    VectorF32 router_bias;             // empty when absent
    VectorF32 selection_bias;          // exp_probs_b: added to the probabilities for choosing only; empty when absent
    ExpertLayerLayout experts;         // routed experts, read through ExpertSource
    // Per-expert biases, expert e's row at e * n_ff (gate, up) or e * n_embd
    // (down); resident, empty when the architecture has none.
    VectorF32 exp_gate_bias, exp_up_bias, exp_down_bias;
    // Shared expert (qwen2moe); rows == 0 when absent.
    MatrixView shexp_gate, shexp_up, shexp_down;
    MatrixView shexp_gate_inp;         // 1 x n_embd: scalar sigmoid gate per token; absent = ungated
    // Dense FFN (SwiGLU) of layers without experts (deepseek2's leading layers).
    MatrixView ffn_gate, ffn_up, ffn_down;
    // Latent attention (MLA, absorbed form); wq holds attn_q when there is no q_lora.
    MatrixView wq_a, wq_b;             // attn_q_a: n_embd -> q_lora; attn_q_b: q_lora -> n_head * (nope + rope)
    VectorF32 q_a_norm;                // [q_lora]
    MatrixView wkv_a;                  // attn_kv_a_mqa: n_embd -> kv_lora + rope
    VectorF32 kv_a_norm;               // [kv_lora]
    MatrixView wk_b;                   // attn_k_b: per head kv_lora rows of nope columns (n_head * kv_lora rows)
    MatrixView wv_b;                   // attn_v_b: per head v_dim rows of kv_lora columns (n_head * v_dim rows)

    // Calls f on every 2-D matrix of the layer (bound or not; routed experts
    // are not matrices here).
    template <typename Self, typename F>
    static void for_each_matrix(Self &l, F &&f) {
        for (auto *m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.router, &l.shexp_gate, &l.shexp_up, &l.shexp_down,
                        &l.shexp_gate_inp, &l.ffn_gate, &l.ffn_up, &l.ffn_down, &l.wq_a, &l.wq_b, &l.wkv_a, &l.wk_b,
                        &l.wv_b})
            f(*m);
    }
};

struct ModelWeights {
    MatrixView token_embd;             // n_embd x n_vocab (one row per token)
    VectorF32 output_norm;
    MatrixView output;                 // n_embd x n_vocab; token_embd when tied
    VectorF32 rope_freqs;              // optional per-pair frequency divisors (llama)
    std::vector<LayerWeights> layers;
};

}  // namespace moe
