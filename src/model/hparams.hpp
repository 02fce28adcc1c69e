// Hyper-parameters of a MoE model, read from GGUF metadata (keys are
// "<general.architecture>.<suffix>", listed in docs/architecture.md,
// "Metadata keys").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_file.hpp"
#include "model/router.hpp"

namespace moe {

struct HParams {
    std::string arch;            // general.architecture
    std::string name;            // general.name ("" if absent)
    int32_t n_vocab = 0;         // rows of token_embd (checked against the tokenizer if present)
    int32_t n_ctx_train = 0;     // context_length
    int32_t n_embd = 0;          // embedding_length
    int32_t n_layer = 0;         // block_count
    int32_t n_head = 0;          // attention.head_count
    int32_t n_head_kv = 0;       // attention.head_count_kv (default n_head)
    int32_t head_dim_k = 0;      // attention.key_length (default n_embd / n_head)
    int32_t head_dim_v = 0;      // attention.value_length (default n_embd / n_head)
    int32_t n_expert = 0;        // expert_count
    int32_t n_expert_used = 0;   // expert_used_count
    int32_t n_ff = 0;            // feed_forward_length (0 if absent)
    int32_t n_ff_expert = 0;     // expert_feed_forward_length, falling back per arch (see docs)
    // Rows of the shared expert(s), 0 without: qwen2moe's
    // expert_shared_feed_forward_length; deepseek2's expert_shared_count x
    // expert_feed_forward_length (its shared experts run as one wider one).
    int32_t n_ff_shared = 0;
    int32_t n_rot = 0;           // rope.dimension_count (default head_dim_k)
    float rope_freq_base = 10000.0f;
    float rope_freq_scale = 1.0f;  // 1 / rope.scaling.factor (linear or YaRN scaling)
    bool rope_yarn = false;        // rope.scaling.type "yarn"
    int32_t rope_n_ctx_orig = 0;   // rope.scaling.original_context_length (default context_length)
    // rope.scaling.attn_factor (default 1): multiplies every rotation's cos/sin
    // (RopeParams::mscale) and, for deepseek2, mscale in its attention scale.
    float rope_attn_factor = 1.0f;
    // Sliding-window attention: the layers flagged in swa_layers (one entry
    // per layer, 1 = the layer slides) see only the last n_swa positions.
    // attention.sliding_window_pattern, a period or per-layer flags, is turned
    // into this table when the file is read. n_swa 0: no window.
    int32_t n_swa = 0;                // attention.sliding_window
    std::vector<uint8_t> swa_layers;  // n_layer entries (empty without a window)
    float rms_eps = 1e-6f;       // attention.layer_norm_rms_epsilon

    bool is_swa(int32_t layer) const {
        return n_swa > 0 && layer >= 0 && size_t(layer) < swa_layers.size() && swa_layers[size_t(layer)] != 0;
    }

    // deepseek2 (0 / defaults elsewhere; docs/architecture.md, "Metadata keys").
    int32_t n_layer_dense_lead = 0;  // leading_dense_block_count: first layers with a dense FFN, no experts
    GatingFunc gating_func = GatingFunc::softmax;  // expert_gating_func
    bool expert_weights_norm = false;  // expert_weights_norm
    float expert_weights_scale = 0.0f; // expert_weights_scale (0 = none)
    int32_t n_expert_group = 0;      // expert_group_count (0 or 1 = no group limit)
    int32_t n_expert_group_used = 0; // expert_group_used_count
    // Latent attention (MLA, absorbed form). head_dim_k / head_dim_v are the
    // cached row (kv_lora_rank + n_rot) and the latent value (kv_lora_rank).
    int32_t q_lora_rank = 0;         // attention.q_lora_rank (0: one attn_q projection)
    int32_t kv_lora_rank = 0;        // attention.kv_lora_rank (0: not latent attention)
    int32_t head_dim_k_mla = 0;      // attention.key_length_mla: qk_nope + qk_rope per query head
    int32_t head_dim_v_mla = 0;      // attention.value_length_mla: value head after decompression
    // The file has one attn_kv_b a layer instead of attn_k_b / attn_v_b (no
    // key_length_mla: converted before the absorbed form, whose keys then
    // describe plain multi-head attention, read as key_length = qk_nope +
    // qk_rope and value_length = v_head). The sizes above are the absorbed
    // form's all the same; binding builds attn_k_b / attn_v_b (kv_b_split.hpp).
    bool joint_kv_b = false;
    // rope.scaling.yarn_log_multiplier present: YaRN's cos/sin keep magnitude
    // 1 (docs/architecture.md, deepseek2).
    bool yarn_log_multiplier_given = false;
    // Multiplies the softmax scale 1/sqrt(key size): mscale^2 for deepseek2,
    // mscale = rope_attn_factor (1 + 0.1 mscale_all_dim ln(factor) under
    // YaRN); 1 elsewhere.
    float kq_scale_factor = 1.0f;

    bool latent_attention() const { return kv_lora_rank > 0; }
    // Whether layer il has routed experts (the leading dense layers have not).
    bool layer_has_experts(int32_t il) const { return il >= n_layer_dense_lead; }
    // 1/sqrt of the dot product's size (the query's nope + rope part under
    // MLA), times kq_scale_factor.
    float attention_scale() const;

    // Reads and validates (positive sizes, head dims dividing, n_expert_used <= n_expert,
    // n_layer <= MOESTREAM_MAX_LAYERS); throws bad_format / unsupported naming the key.
    static HParams from_gguf(const gguf::GgufFile &file);
};

// The sliding layers of a period (llama.cpp's set_swa_pattern): within each
// group of `period` layers the first period - 1 slide, and period 0 makes
// every layer slide. One entry per layer, 1 = slides.
std::vector<uint8_t> swa_layers_of_period(int32_t n_layer, int32_t period);

// The context length a context opened with n_ctx has: n_ctx, or for 0 the
// model's training length capped at 4096 (4096 when the file does not say).
int32_t context_length(const HParams &hp, int32_t n_ctx);

}  // namespace moe
