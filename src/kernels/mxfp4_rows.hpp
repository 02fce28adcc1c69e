// The MXFP4 decoder of the legacy row loops (quant_rows.hpp), shared by the
// AVX2 and AVX-512 files: each block's nibbles looked up in the doubled e2m1
// table made unsigned (+12, the kernel subtracts 12 times the activation
// block sum), and the eight blocks' scales built from their exponent bytes
// with the bits e8m0_half_bits gives. Internal linkage on purpose.
#pragma once

#include <immintrin.h>

#include "kernels/mxfp4.hpp"
#include "kernels/quant_rows.hpp"

namespace moe::kernels::detail {
namespace {

struct Mxfp4Dec {
    static constexpr size_t kBytes = mxfp4::bytes, kD = mxfp4::e, kQs = mxfp4::qs, kQh = 0;
    static constexpr bool kMin = false, kFive = false;
    static constexpr int32_t kOffset = mxfp4::kOffset;
    static constexpr int kMaxWeight = [] {
        int m = 0;
        for (int8_t v : mxfp4::kValues) m = v + kOffset > m ? v + kOffset : m;
        return m;
    }();

    static constexpr int8_t lifted(int i) { return static_cast<int8_t>(mxfp4::kValues[i] + kOffset); }
    // The lifted values as a vpshufb table (also Nibbles8's levels on AVX-512).
    MOE_ALWAYS_INLINE static __m128i levels() {
        return _mm_setr_epi8(lifted(0), lifted(1), lifted(2), lifted(3), lifted(4), lifted(5), lifted(6), lifted(7),
                             lifted(8), lifted(9), lifted(10), lifted(11), lifted(12), lifted(13), lifted(14),
                             lifted(15));
    }
    MOE_ALWAYS_INLINE static __m256i uints(const uint8_t *b) {
        const __m128i table = levels();
        return _mm256_shuffle_epi8(_mm256_setr_m128i(table, table), avx2::nibbles32(b + mxfp4::qs));
    }
    static float scale1(const uint8_t *b) { return mxfp4_scale(b); }
    MOE_ALWAYS_INLINE static __m256 scales8(const uint8_t *w) {
        return scales_of(_mm256_and_si256(gather8_u32<kBytes>(w + mxfp4::e), _mm256_set1_epi32(0xFF)));
    }
    // The scales of eight blocks from their exponent bytes e (one per 32-bit
    // lane, zero-extended): the bits (e - 1) << 23 for e >= 2 and
    // 0x00200000 << e for e = 0, 1, as the larger (signed) of two lines:
    // (e - 1) << 23 is negative at e = 0 and 0 at e = 1, where (e + 1) << 21
    // is 0x00200000 and 0x00400000, and from e = 2 on (e + 1) << 21 stays
    // below (e - 1) << 23 (e + 1 <= 4e - 4). Two shifts, two adds and a max,
    // where a variable shift, a compare and a blend made the small values.
    MOE_ALWAYS_INLINE static __m256 scales_of(__m256i e) {
        const __m256i normal = _mm256_sub_epi32(_mm256_slli_epi32(e, 23), _mm256_set1_epi32(1 << 23));
        const __m256i tiny = _mm256_add_epi32(_mm256_slli_epi32(e, 21), _mm256_set1_epi32(1 << 21));
        return _mm256_castsi256_ps(_mm256_max_epi32(normal, tiny));
    }
};

}  // namespace
}  // namespace moe::kernels::detail
