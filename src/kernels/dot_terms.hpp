// The float contribution ("term") of one block to a quantised dot product,
// given its exact integer sums. Every ISA evaluates exactly these operations
// (no fused multiply-add; kernel files are built with -ffp-contract=off).
#pragma once

#include <cstdint>

namespace moe::kernels::detail {
// Internal linkage: these are compiled into files with different ISA flags,
// and the linker must never substitute one file's copy for another's.
namespace {

// Q4_0 / Q5_0 / Q8_0 weights with Q8_0 activations.
inline float term_d(int32_t sumi, float dw, float da) { return static_cast<float>(sumi) * (dw * da); }

// Q4_1 / Q5_1 weights (min mw) with Q8_1 activations (sa = da * sum(qa)).
inline float term_dm(int32_t sumi, float dw, float da, float mw, float sa) {
    return static_cast<float>(sumi) * (dw * da) + mw * sa;
}

// Q4_K / Q5_K with Q8_K: sumi = sum_s sc_s * <q_s, qa_s>, summ = sum_s m_s * bsum_s.
inline float term_k_min(int32_t sumi, int32_t summ, float dw, float dminw, float da) {
    return (dw * da) * static_cast<float>(sumi) - (dminw * da) * static_cast<float>(summ);
}

// Q6_K with Q8_K: sumi = sum_g sc_g * <q_g, qa_g> with signed q.
inline float term_k(int32_t sumi, float dw, float da) { return (dw * da) * static_cast<float>(sumi); }

}  // namespace
}  // namespace moe::kernels::detail
