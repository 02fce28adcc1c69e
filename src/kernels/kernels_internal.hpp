// Kernel tables shared by the dispatcher and the per-ISA files.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/ggml_types.hpp"
#include "kernels/kernels.hpp"

namespace moe::kernels::detail {

using DotFn = float (*)(int64_t n, const void *w_row, const void *act);
using MatvecFn = void (*)(int64_t n, const uint8_t *w, size_t row_bytes, const void *act, float *y,
                          int64_t r0, int64_t r1);
using MatmatFn = void (*)(int64_t n, const uint8_t *w, size_t row_bytes, const void *act,
                          size_t act_stride, int32_t n_tokens, float *y, size_t y_stride, int64_t r0,
                          int64_t r1);
// Per-thread scratch bytes a matvec/matmat call of n_tokens rows of n takes.
using ScratchBytesFn = size_t (*)(int64_t n, int32_t n_tokens);

struct TypeKernels {
    DotFn dot = nullptr;        // quantised-activation dot (null: type unsupported)
    MatvecFn matvec = nullptr;  // optional; default loops over dot
    MatmatFn matmat = nullptr;  // optional; default loops over dot per row and token
    ScratchBytesFn scratch_bytes = nullptr;  // null: the kernels take no scratch
};

// Activation conversion of n floats (a multiple of the block size; any n
// for f16); null: scalar.
using QuantizeFn = void (*)(const float *x, uint8_t *dst, int64_t n);
struct ActKernels {
    QuantizeFn q8_0 = nullptr, q8_1 = nullptr, q8_k = nullptr, f16 = nullptr;
};

struct KernelTable {
    TypeKernels type[kMaxGgmlTypeId];
    ActKernels act;
};

// Fills the table with the scalar reference kernels.
void fill_scalar_kernels(KernelTable &table);
// Overwrites entries with ISA-specific kernels (defined in simd_avx2.cpp / simd_avx512.cpp).
void fill_avx2_kernels(KernelTable &table);
void fill_avx512_kernels(KernelTable &table);
// Activation conversion on AVX2 (quantize_act_avx2.cpp), also used by AVX-512.
void fill_avx2_act_kernels(KernelTable &table);

// Per-thread scratch memory of at least `bytes` (64-byte aligned), kept for
// reuse: it only allocates when a call needs more than any before it on the
// same thread (reserve_scratch sizes it ahead of the hot path). Defined in a
// baseline file so no ISA-specific code is shared.
void *kernel_scratch(size_t bytes);

// Exact mode (f32 activations, weights dequantised a block at a time).
float dot_exact(GgmlType weight, int64_t n, const void *w_row, const float *act);

// Scalar dequantisation of n elements (n a multiple of the block size).
void dequantize_scalar(GgmlType type, const void *src, float *dst, int64_t n);

}  // namespace moe::kernels::detail
