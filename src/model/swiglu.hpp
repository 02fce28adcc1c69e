// SwiGLU activation: h = silu(gate) * up with silu(v) = v / (1 + exp(-v)).
#pragma once

#include <cmath>
#include <cstdint>

namespace moe {

// h[i] = silu(gate[i]) * up[i], eight at a time (swiglu.cpp). Each element
// gets the same operations wherever it lies in the range, so splitting a row
// into chunks never changes a result.
void swiglu(const float *gate, const float *up, float *h, int64_t n);

inline float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

}  // namespace moe
