// Random-weight model generator: writes a GGUF with the tensor shapes, types
// and metadata of a real MoE architecture, filled with valid random quant
// blocks. Used by the demo, benchmarks and tests (no download, no Python).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "moestream.h"

namespace moe {

struct GeneratorConfig {
    std::string arch;  // "qwen3moe" or "gpt-oss"; empty: the preset's (qwen3moe for generic presets)
    std::string preset = "small";
    std::string quant = "q4_k_m";
    int32_t n_layer = 0, n_embd = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
    int32_t n_expert = 0, n_expert_used = 0, n_ff_expert = 0, n_vocab = 0;
    uint64_t seed = 0;
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
