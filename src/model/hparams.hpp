// Hyper-parameters of a MoE model, read from GGUF metadata (keys are
// "<general.architecture>.<suffix>", listed in docs/architecture.md,
// "Metadata keys").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_file.hpp"

namespace moe {

enum class RopeType : int32_t { normal = 0, neox = 2 };

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
    int32_t n_ff_shared = 0;     // expert_shared_feed_forward_length (qwen2moe), 0 without a shared expert
    int32_t n_rot = 0;           // rope.dimension_count (default head_dim_k)
    float rope_freq_base = 10000.0f;
    float rope_freq_scale = 1.0f;  // 1 / rope.scaling.factor for linear scaling
    RopeType rope_type = RopeType::normal;
    float rms_eps = 1e-6f;       // attention.layer_norm_rms_epsilon
    bool norm_topk_weights = false;  // renormalise the top-k routing weights
    bool tied_output = false;    // output.weight absent and token_embd reused

    // Reads and validates (positive sizes, head dims dividing, n_expert_used <= n_expert,
    // n_layer <= MOESTREAM_MAX_LAYERS); throws bad_format / unsupported naming the key.
    static HParams from_gguf(const gguf::GgufFile &file);
};

}  // namespace moe
