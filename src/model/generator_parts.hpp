// The generator's pieces shared by its per-architecture files: tensor specs,
// quant mixes and the scales that keep random models numerically sane.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/ggml_types.hpp"
#include "gguf/gguf_writer.hpp"
#include "model/generator.hpp"

namespace moe::gen {

// joint_kv_b: deepseek2's attn_kv_b holding the weights of `parts` (JointKvB).
enum class Init { normal, ones, router, joint_kv_b };

struct TensorSpec {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    Init init;
    float sigma;  // standard deviation of the weights
    std::vector<TensorSpec> parts = {};  // Init::joint_kv_b: attn_k_b, attn_v_b
};

// Random numbers for tensor data: fast, and reproducible per tensor.
struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed ^ 0x9E3779B97F4A7C15ull) {}
    uint64_t next();
    float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }  // [0,1)
    void fill(uint8_t *p, size_t n);
};

// The generator of the tensor named `name`: its data is the same whatever
// else the file holds.
Rng tensor_rng(const GeneratorConfig &c, const std::string &name);

// n_blocks blocks of `type` whose dequantised values have mean ~0 and std
// ~sigma, drawn in order from `rng` (generator.cpp).
void fill_blocks(GgmlType type, uint8_t *out, uint64_t n_blocks, float sigma, Rng &rng);

struct QuantMix {
    GgmlType attn_qko, attn_v, exp_gate_up, exp_down, embd, output;
    uint32_t file_type;
};

// K-quant `want` for rows of `row` elements, or llama-quantize's fallback.
GgmlType fit(GgmlType want, int64_t row);

// The tensor types of a --quant name; throws invalid_argument for others.
QuantMix quant_mix(const std::string &quant);

// Attention output projections are drawn 10x smaller than fan-in scaling.
// Over a short context, random attention is close to an average of the
// values of all positions: a component every token shares. At full scale it
// piles up over the layers until it dominates the residual stream, and
// consecutive tokens fed random ids then route to mostly the same experts
// (overlap of top-8 of 128 rising from 7% at layer 0 to ~60% at layer 47).
// At 0.1 the token-specific parts (embedding, expert outputs) dominate:
// consecutive tokens overlap as independent uniform draws do (k/n_expert),
// while each layer still changes the residual only a little, so layer L+1's
// router on layer L's state predicts most of layer L+1's experts, as in
// trained models. docs/performance.md has the measurements.
constexpr float kAttnOutputScale = 0.1f;

// Routers are F32 with logit std ~3 on normalised input, so top-k choices
// have margins far above quantisation noise.
constexpr float kRouterGain = 3.0f;

// The normal-init scale of a matrix with n inputs (fan-in).
inline float inv_sqrt(int64_t n) { return 1.0f / std::sqrt(static_cast<float>(n)); }

// deepseek2 (generator_deepseek2.cpp): the shape extras of a deepseek2
// preset (null for other presets), one layer's tensors (of the types of the
// config's quant mix `q`) and the header keys that differ from the common ones.
const Deepseek2Shape *deepseek2_preset(const std::string &preset);
void deepseek2_resolve(GeneratorConfig &c);  // fits the extras to overridden shapes, validates
void deepseek2_layer_specs(const GeneratorConfig &c, const QuantMix &q, int32_t layer, std::vector<TensorSpec> &out);
void deepseek2_header(gguf::GgufWriter &w, const GeneratorConfig &c);

// deepseek2's attn_kv_b (GeneratorConfig::attn_kv_b), one head's rows at a
// time: the F32 values of the split layout's attn_k_b (transposed) and
// attn_v_b of the same seed, so that both layouts hold the same weights.
class JointKvB {
public:
    JointKvB(const GeneratorConfig &c, const TensorSpec &kv_b);
    uint64_t elems_per_head() const { return uint64_t(nope_ + v_head_) * uint64_t(kv_lora_); }
    // Writes the next head's nope key rows then v_head value rows, kv_lora floats each.
    void next_head(float *out);

private:
    const TensorSpec &k_b_, &v_b_;
    int64_t nope_, v_head_, kv_lora_;
    Rng k_rng_, v_rng_;
    std::vector<uint8_t> blocks_;
    std::vector<float> k_, v_;
};

}  // namespace moe::gen
