// Random-weight model generator: writes a GGUF with the tensor shapes, types
// and metadata of a real MoE architecture, filled with valid random quant
// blocks. Used by the demo, benchmarks and tests (no download, no Python).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "moestream.h"

namespace moe {

// deepseek2's sizes beyond the common shape fields, taken from its preset:
// latent attention (query heads of head_dim = qk_nope + qk_rope), leading
// dense layers, shared experts and the routing variant.
struct Deepseek2Shape {
    int32_t n_dense_lead = 0, n_ff_dense = 0, n_expert_shared = 0;
    int32_t q_lora_rank = 0;  // 0: one attn_q projection (V2-Lite)
    int32_t kv_lora_rank = 0, qk_rope = 0, v_head = 0;
    int32_t n_group = 0, n_group_used = 0;  // group-limited choice when n_group > 1
    bool sigmoid = false;                   // sigmoid gating with an exp_probs_b selection bias; else softmax
    bool weights_norm = false;
    float weights_scale = 1.0f;
    float yarn_factor = 0.0f, yarn_mscale_all_dim = 0.0f;
    int32_t yarn_orig_ctx = 0;
};

struct GeneratorConfig {
    std::string arch;  // "qwen3moe", "gpt-oss" or "deepseek2"; empty: the preset's (qwen3moe for generic presets)
    std::string preset = "small";
    std::string quant = "q4_k_m";
    int32_t n_layer = 0, n_embd = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
    int32_t n_expert = 0, n_expert_used = 0, n_ff_expert = 0, n_vocab = 0;
    uint64_t seed = 0;
    // gpt-oss: attention.sliding_window (0 = the real models' 128); a small
    // window lets tests run contexts many windows long. Not in the C API.
    int32_t sliding_window = 0;
    Deepseek2Shape deepseek2;  // filled from the preset by resolve_generator_config
    // deepseek2: one F32 attn_kv_b a layer and the keys of files converted
    // before absorbed latent attention, instead of attn_k_b / attn_v_b; the
    // same weights as the split layout of the same seed (generator_parts.hpp, JointKvB).
    bool attn_kv_b = false;
};

// The largest value of each shape field (moestream.h documents them).
struct GeneratorLimits {
    int32_t n_layer, n_embd, n_head, head_dim, n_expert, n_ff_expert, n_vocab;
};
inline constexpr GeneratorLimits kGeneratorMax = {
    MOESTREAM_GENERATE_MAX_LAYERS, MOESTREAM_GENERATE_MAX_EMBD,    MOESTREAM_GENERATE_MAX_HEADS,
    MOESTREAM_GENERATE_MAX_HEAD_DIM, MOESTREAM_GENERATE_MAX_EXPERTS, MOESTREAM_GENERATE_MAX_FF_EXPERT,
    MOESTREAM_GENERATE_MAX_VOCAB};

// Fills every zero field from the preset and validates the result; throws
// invalid_argument / unsupported naming the bad field.
GeneratorConfig resolve_generator_config(const GeneratorConfig &requested);

// Bytes of the file generate_model would write.
uint64_t generated_model_size(const GeneratorConfig &config);

// Writes the model to `path` through an AtomicFile: a run that fails leaves
// an earlier file there as it was, and no partial one.
void generate_model(const GeneratorConfig &config, const std::string &path,
                    const std::function<void(uint64_t done, uint64_t total)> &progress = {});

}  // namespace moe
