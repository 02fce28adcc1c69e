#include "model/swiglu.hpp"

#include "model/vec8.hpp"

namespace moe {
namespace {

using vec8::F8;
using vec8::kLanes;

// silu(v) from e = exp(-|v|), which never overflows: v / (1 + e) for v >= 0,
// and v e / (1 + e) = v / (1 + exp(-v)) for v < 0. NaN stays NaN.
MOE_VEC8_INLINE F8 silu8(F8 v) {
    const F8 e = vec8::exp8_nonpositive(-vec8::abs8(v));
    const F8 num = vec8::select8(v >= 0.0f, v, v * e);  // a NaN v takes v * e, also NaN
    return num / (1.0f + e);
}

}  // namespace

MOE_VEC8_CLONES void swiglu(const float *gate, const float *up, float *h, int64_t n) {
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        vec8::store8(h + i, silu8(vec8::load8(gate + i)) * vec8::load8(up + i));
    if (i < n) {
        alignas(32) float g[kLanes] = {}, u[kLanes] = {}, out[kLanes];
        for (int64_t j = i; j < n; ++j) g[j - i] = gate[j], u[j - i] = up[j];
        vec8::store8(out, silu8(vec8::load8(g)) * vec8::load8(u));
        for (int64_t j = i; j < n; ++j) h[j] = out[j - i];
    }
}

}  // namespace moe
