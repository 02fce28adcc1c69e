// AVX2 activation conversion to Q8_0 / Q8_1 / Q8_K, bit-identical to the
// scalar definitions in quantize_act.cpp:
//  - the maxima ignore NaN like std::fmax / the scalar `>` test (vmaxps
//    returns its second operand when the first is NaN);
//  - x * multiplier is one rounded f32 product, converted with the current
//    (round-to-nearest-even) mode, as std::nearbyint does;
//  - fp16 fields use the same scalar conversion.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/blocks.hpp"
#include "kernels/kernels_internal.hpp"

namespace moe::kernels::detail {
namespace {

inline float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

inline int32_t hsum8_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

// Largest |x| over n (a multiple of 8) values, NaN ignored.
inline float abs_max(const float *x, int n) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < n; j += 8) m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + j), abs_mask), m);
    return hmax8(m);
}

// 8 rounded products x * mul as int32.
inline __m256i round8(const float *x, __m256 mul) { return _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), mul)); }

// 32 int32 (four vectors, each within int8) -> 32 int8 in element order.
inline __m256i pack32(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    const __m256i bytes = _mm256_packs_epi16(ab, cd);
    return _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// One block of 32: quants to q, returns the f32 d and the sum of the quants.
inline float block_q8(const float *x, uint8_t *q, int32_t &sum) {
    const float amax = abs_max(x, 32);
    const float d = amax / 127.0f;
    const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
    const __m256i v0 = round8(x, id), v1 = round8(x + 8, id), v2 = round8(x + 16, id), v3 = round8(x + 24, id);
    sum = hsum8_i32(_mm256_add_epi32(_mm256_add_epi32(v0, v1), _mm256_add_epi32(v2, v3)));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(q), pack32(v0, v1, v2, v3));
    return d;
}

void quantize_q8_0_avx2(const float *x, uint8_t *dst, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b, x += 32, dst += q8_0::bytes) {
        int32_t sum;
        const uint16_t dh = f32_to_half(block_q8(x, dst + q8_0::qs, sum));
        std::memcpy(dst + q8_0::d, &dh, 2);
    }
}

void quantize_q8_1_avx2(const float *x, uint8_t *dst, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b, x += 32, dst += q8_1::bytes) {
        int32_t sum;
        const float d = block_q8(x, dst + q8_1::qs, sum);
        const uint16_t dh = f32_to_half(d), sh = f32_to_half(d * static_cast<float>(sum));
        std::memcpy(dst + q8_1::d, &dh, 2);
        std::memcpy(dst + q8_1::s, &sh, 2);
    }
}

void quantize_q8_k_avx2(const float *x, uint8_t *dst, int64_t n) {
    for (int64_t b = 0; b < n / 256; ++b, x += 256, dst += q8_k::bytes) {
        const float amax = abs_max(x, 256);
        uint8_t *q = dst + q8_k::qs;
        int16_t bsums[16] = {};
        float d = 0.0f;
        if (amax == 0.0f) {
            std::memset(q, 0, 256);
        } else {
            int first = 0;  // the first element of largest magnitude
            while (!(std::fabs(x[first]) == amax)) ++first;
            const float iscale = -127.0f / x[first];
            const __m256 mul = _mm256_set1_ps(iscale);
            const __m256i top = _mm256_set1_epi32(127);
            for (int j = 0; j < 256; j += 32) {
                __m256i v[4];
                for (int k = 0; k < 4; ++k) v[k] = _mm256_min_epi32(round8(x + j + 8 * k, mul), top);
                _mm256_storeu_si256(reinterpret_cast<__m256i *>(q + j), pack32(v[0], v[1], v[2], v[3]));
                bsums[j / 16] = static_cast<int16_t>(hsum8_i32(_mm256_add_epi32(v[0], v[1])));
                bsums[j / 16 + 1] = static_cast<int16_t>(hsum8_i32(_mm256_add_epi32(v[2], v[3])));
            }
            d = 1.0f / iscale;
        }
        std::memcpy(dst + q8_k::d, &d, 4);
        std::memcpy(dst + q8_k::bsums, bsums, sizeof bsums);
    }
}

// vcvtps2ph rounds to nearest even like f32_to_half, gives infinity on
// overflow, keeps subnormals (the MXCSR flush bits do not apply to it) and
// quiets NaNs keeping the top payload bits, as f32_to_half does.
void to_f16_avx2(const float *x, uint8_t *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + 2 * i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; ++i) {
        const uint16_t h = f32_to_half(x[i]);
        std::memcpy(dst + 2 * i, &h, 2);
    }
}

}  // namespace

void fill_avx2_act_kernels(KernelTable &t) {
    t.act.f16 = to_f16_avx2;
    t.act.q8_0 = quantize_q8_0_avx2;
    t.act.q8_1 = quantize_q8_1_avx2;
    t.act.q8_k = quantize_q8_k_avx2;
}

}  // namespace moe::kernels::detail
