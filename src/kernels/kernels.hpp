// Compute kernels over GGUF weight rows.
//
// Weights are never expanded to f32 in memory. A matrix-vector product first
// converts the activation vector once into the format the weight type is
// dotted against (act_type: Q8_0, Q8_1, Q8_K, F16, BF16 or F32), then takes an
// integer/low-precision dot product per block. In exact mode activations stay
// f32 and each weight block is dequantised on the fly (slow; for checking).
//
// All variants (scalar reference, AVX2, AVX-512) compute the same integer
// block sums and then the same float operations in the same order, so results
// are bit-identical across ISAs and independent of threading:
//  - quantised dots: block b contributes term_b (kernels/dot_terms.hpp, no
//    fused multiply-add) to lane b % 8; the 8 lanes are summed pairwise
//    (i + i+4, then i + i+2, then 0 + 1);
//  - float dots (F32/F16/BF16 weights, and exact mode): element i is
//    fused-multiply-added into lane i % 32; lanes are halved 32 -> 16 -> 8 and
//    then summed as above.
//
// Dequantised values (f32 arithmetic, each operation rounded, no FMA; q are
// the integer weights after removing offsets, d/m/dmin the block's fp16 fields):
//   Q4_0 (q-8)*d   Q5_0 (q-16)*d   Q8_0 q*d   Q4_1/Q5_1 q*d + m
//   Q4_K/Q5_K  (d*sc)*q - (dmin*m)   per 32-element sub-block (sc, m 6-bit)
//   Q6_K       (d*sc)*(q-32)         per 16-element group (sc int8)
//   Q2_K       (d*sc)*q - (dmin*m)   per 16-element group g: sc, m the low and
//              high nibble of scales[g]; q = bits 2j of qs[32n+l] for element
//              128n+32j+l (0..3)
//   Q3_K       (d*S)*q               per 16-element group: S the signed 6-bit
//              scale (-32..31), q = the two Q2_K bits - 4 unless hmask bit
//              4n+j of byte l is set (-4..3)
//   IQ4_NL     d*K[nibble]           K = {-127,-104,-83,-65,-49,-35,-22,-10,
//                                         1,13,25,38,53,69,89,113}
//   IQ4_XS     (d*S)*K[nibble]       per 32-element sub-block, S the signed
//              6-bit scale (scales_l nibble | scales_h 2 bits << 4) - 32
//   MXFP4      F*s, F the doubled e2m1 value (-12..12), s = 2^(e-128) (kernels/mxfp4.hpp)
//   F16/BF16 exact conversion.
// Block terms of the quantised dots (kernels/dot_terms.hpp), with integer
// sums over the block's groups (qa the activation quants, bsum their sum over
// the group a min applies to, from the Q8_K sums per 16):
//   Q4_0/Q5_0/Q8_0/IQ4_NL . Q8_0   sumi*(dw*da), sumi = <q, qa>
//   MXFP4 . Q8_0                   sumi*(s*da), sumi = <F, qa> (as Q4_0)
//   Q4_1/Q5_1 . Q8_1               sumi*(dw*da) + mw*sa
//   Q2_K/Q4_K/Q5_K . Q8_K          (dw*da)*sumi - (dminw*da)*summ,
//                                  sumi = sum sc*<q, qa>, summ = sum m*bsum
//   Q3_K/Q6_K/IQ4_XS . Q8_K        (dw*da)*sumi, sumi = sum S*<q, qa>
// Activation formats (act_type): Q8_0 for Q4_0, Q5_0, Q8_0, IQ4_NL,
// MXFP4; Q8_1 for
// Q4_1, Q5_1; Q8_K for Q2_K..Q6_K and IQ4_XS.
// Q8_0 d = amax/127 (stored fp16), q = round_half_even(x * (127/amax));
// Q8_1 adds s = fp16(d * sum q) with the f32 d; Q8_K d = 1/(-127/max) as f32
// where max is the first element of largest magnitude, q = min(127, round_half_even(x * -127/max)).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/ggml_types.hpp"

namespace moe::kernels {

enum class Isa : int { scalar = 0, avx2 = 1, avx512 = 2 };

// The ISA in use: the best the CPU supports, or MOESTREAM_ISA=scalar|avx2|avx512
// (clamped to what the CPU supports). Decided once at first use.
Isa active_isa();
const char *isa_name(Isa isa);
// Forces an ISA (tests and benchmarks); returns false if the CPU lacks it.
bool set_isa(Isa isa);

// --- element conversion ------------------------------------------------------
float fp16_to_f32(uint16_t h);
uint16_t f32_to_fp16(float f);        // round to nearest even
// n conversions as f32_to_fp16 gives them, vectorised where the CPU can.
void f32_to_fp16_row(const float *x, uint16_t *out, int64_t n);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);        // round to nearest even, NaN stays NaN

// Dequantises n elements (n a multiple of the block size) of any supported type.
void dequantize_row(GgmlType type, const void *src, float *dst, int64_t n);

// --- activations -------------------------------------------------------------
// Format the activations are converted to for weights of `weight` type.
GgmlType act_type(GgmlType weight, bool exact);
// Bytes of one converted activation row of n elements.
size_t act_row_bytes(GgmlType weight, int64_t n, bool exact);
// Converts n f32 activations for dotting against `weight` rows.
void quantize_act(GgmlType weight, const float *x, void *dst, int64_t n, bool exact);

// --- dot products ------------------------------------------------------------
// Dot product of one weight row (n elements of `weight` type) with one
// activation row prepared by quantize_act with the same `exact`.
float dot(GgmlType weight, int64_t n, const void *w_row, const void *act, bool exact);

// y[r - r0] = dot(row r of W, act) for r in [r0, r1). W rows are row_bytes apart.
void matvec_rows(GgmlType weight, int64_t n, const uint8_t *w, size_t row_bytes,
                 const void *act, float *y, int64_t r0, int64_t r1, bool exact);

// Multi-token form: for each row r in [r0, r1) and token t < n_tokens,
// y[t * y_stride + r] = dot(row r of W, act + t * act_stride) (note: y indexed
// by the absolute row r, unlike matvec_rows; act_stride in bytes, y_stride in
// floats). Each weight row is read once for all tokens. Results equal
// matvec_rows per token exactly.
void matmat_rows(GgmlType weight, int64_t n, const uint8_t *w, size_t row_bytes,
                 const void *act, size_t act_stride, int32_t n_tokens,
                 float *y, size_t y_stride, int64_t r0, int64_t r1, bool exact);

// The calling thread's kernel scratch: matvec/matmat calls keep per-token
// working memory in a per-thread buffer that grows on first need. A thread
// about to run the hot path reserves the largest it will need, so no call
// allocates later: matmat_scratch_bytes gives what one call of n_tokens rows
// of n `weight` elements takes (0 in exact mode or for kernels without one).
size_t matmat_scratch_bytes(GgmlType weight, int64_t n, int32_t n_tokens, bool exact);
void reserve_scratch(size_t bytes);

}  // namespace moe::kernels
