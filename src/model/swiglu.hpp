// Gated activations between an expert's gate/up and down projections:
// SwiGLU h = silu(gate) * up with silu(v) = v / (1 + exp(-v)), and gpt-oss's
// clamped variant.
#pragma once

#include <cmath>
#include <cstdint>

namespace moe {

enum class ExpertAct : int32_t {
    swiglu = 0,      // silu(gate) * up
    swiglu_oai = 1,  // x sigmoid(kOaiAlpha x) (y + 1), x = min(gate, kOaiLimit), y = clamp(up, +-kOaiLimit)
};
inline constexpr float kOaiAlpha = 1.702f;
inline constexpr float kOaiLimit = 7.0f;

// h[i] = silu(gate[i]) * up[i], eight at a time (swiglu.cpp). Each element
// gets the same operations wherever it lies in the range, so splitting a row
// into chunks never changes a result.
void swiglu(const float *gate, const float *up, float *h, int64_t n);
// The clamped variant, with the same chunking guarantee.
void swiglu_oai(const float *gate, const float *up, float *h, int64_t n);

// An expert's hidden row: gate and up get their bias rows added in place
// (a null bias adds nothing and costs nothing), then h = act(gate, up).
void expert_activation(ExpertAct act, float *gate, float *up, const float *gate_bias, const float *up_bias,
                       float *h, int64_t n);

inline float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

}  // namespace moe
