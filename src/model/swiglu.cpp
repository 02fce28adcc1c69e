#include "model/swiglu.hpp"

#include "model/vec8.hpp"

namespace moe {
namespace {

using vec8::F8;
using vec8::kLanes;

// v sigmoid(alpha v) from e = exp(-|alpha v|), which never overflows:
// v / (1 + e) for alpha v >= 0, and v e / (1 + e) = v / (1 + exp(-alpha v))
// otherwise. NaN stays NaN. alpha = 1 is silu (v * 1 is v, bit for bit).
MOE_VEC8_INLINE F8 gated8(F8 v, float alpha) {
    const F8 av = v * alpha;
    const F8 e = vec8::exp8_nonpositive(-vec8::abs8(av));
    const F8 num = vec8::select8(av >= 0.0f, v, v * e);  // a NaN v takes v * e, also NaN
    return num / (1.0f + e);
}

MOE_VEC8_INLINE F8 swiglu8(F8 gate, F8 up) { return gated8(gate, 1.0f) * up; }

MOE_VEC8_INLINE F8 swiglu_oai8(F8 gate, F8 up) {
    const F8 x = vec8::select8(gate > kOaiLimit, F8{} + kOaiLimit, gate);
    F8 y = vec8::select8(up > kOaiLimit, F8{} + kOaiLimit, up);
    y = vec8::select8(y < -kOaiLimit, F8{} - kOaiLimit, y);
    return gated8(x, kOaiAlpha) * (y + 1.0f);
}

// h = Op(gate, up) eight at a time; a partial last group goes through the
// same operations on zero-padded lanes.
template <F8 (*Op)(F8, F8)>
MOE_VEC8_INLINE void gated_rows(const float *gate, const float *up, float *h, int64_t n) {
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) vec8::store8(h + i, Op(vec8::load8(gate + i), vec8::load8(up + i)));
    if (i < n) {
        alignas(32) float g[kLanes] = {}, u[kLanes] = {}, out[kLanes];
        for (int64_t j = i; j < n; ++j) g[j - i] = gate[j], u[j - i] = up[j];
        vec8::store8(out, Op(vec8::load8(g), vec8::load8(u)));
        for (int64_t j = i; j < n; ++j) h[j] = out[j - i];
    }
}

}  // namespace

MOE_VEC8_CLONES void swiglu(const float *gate, const float *up, float *h, int64_t n) {
    gated_rows<swiglu8>(gate, up, h, n);
}

MOE_VEC8_CLONES void swiglu_oai(const float *gate, const float *up, float *h, int64_t n) {
    gated_rows<swiglu_oai8>(gate, up, h, n);
}

void expert_activation(ExpertAct act, float *gate, float *up, const float *gate_bias, const float *up_bias,
                       float *h, int64_t n) {
    if (gate_bias)
        for (int64_t i = 0; i < n; ++i) gate[i] = gate[i] + gate_bias[i];
    if (up_bias)
        for (int64_t i = 0; i < n; ++i) up[i] = up[i] + up_bias[i];
    if (act == ExpertAct::swiglu_oai) swiglu_oai(gate, up, h, n);
    else swiglu(gate, up, h, n);
}

}  // namespace moe
