// MXFP4 (GGML type 39, the expert format of gpt-oss files): 32 elements in
// 17 bytes, an E8M0 exponent byte e then 16 bytes of e2m1 nibbles (low
// nibbles are elements 0..15, high nibbles 16..31, as Q4_0). Weights are
// dotted against Q8_0 activations.
//
// The nibble values are kept doubled (F below, integers -12..12), so a
// block's integer sum is exact, and the scale is halved to match:
// s = 2^(e - 128), built from its bits (e < 2 gives the f32 subnormals
// 2^-128, 2^-127). Element i is F[nibble] * s; a block's dot term is
// term_d(sum F[nibble] * q, s, d_act), the Q4_0 term.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/blocks.hpp"
#include "kernels/fp_convert.hpp"

namespace moe::kernels::detail {
// Internal linkage: compiled into files with different ISA flags.
namespace {

namespace mxfp4 {
constexpr size_t bytes = 17, e = 0, qs = 1;
// Doubled e2m1 values by nibble: sign bit 3, magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6.
constexpr int8_t kValues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
// Added to every value by decoders that need unsigned weights (kernel
// subtracts it times the activation block sum).
constexpr int32_t kOffset = 12;
}  // namespace mxfp4

// The f32 bits of s = 2^(e - 128).
constexpr uint32_t e8m0_half_bits(uint8_t e) { return e < 2 ? 0x00200000u << e : uint32_t(e - 1) << 23; }
inline float e8m0_half(uint8_t e) { return f32_from_bits(e8m0_half_bits(e)); }
inline float mxfp4_scale(const uint8_t *block) { return e8m0_half(block[mxfp4::e]); }

// The 32 doubled values of one block, in element order.
inline void mxfp4_ints(const uint8_t *b, int8_t *v) { nibble_lookup32(mxfp4::kValues, b + mxfp4::qs, v); }

}  // namespace
}  // namespace moe::kernels::detail
