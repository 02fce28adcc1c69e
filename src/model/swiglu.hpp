// SwiGLU activation: h = silu(gate) * up with silu(v) = v / (1 + exp(-v)).
#pragma once

#include <cmath>
#include <cstdint>

namespace moe {

inline float silu(float v) { return v / (1.0f + std::exp(-v)); }

inline void swiglu(const float *gate, const float *up, float *h, int64_t n) {
    for (int64_t i = 0; i < n; ++i) h[i] = silu(gate[i]) * up[i];
}

inline float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

}  // namespace moe
