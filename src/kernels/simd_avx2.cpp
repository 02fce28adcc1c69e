// AVX2 + FMA + F16C kernels. Same integer block sums and the same float
// operations in the same order as the scalar reference (blocks.hpp,
// dot_terms.hpp), so results are bit-identical to it.
#include <immintrin.h>

#include <cmath>

#include "kernels/blocks.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/dot_terms.hpp"
#include "kernels/simd_avx2_blocks.hpp"

namespace moe::kernels::detail {
namespace {

using namespace avx2;

// --- legacy blocks against Q8_0 / Q8_1 -----------------------------------------

// Weight decoders: 32 int8 weights of one block (signed for the Q8_0 family,
// unsigned for the Q8_1 family), in element order.
struct Q4_0W {
    static constexpr size_t kBytes = q4_0::bytes, kD = q4_0::d;
    static __m256i ints(const uint8_t *b) { return _mm256_sub_epi8(nibbles32(b + q4_0::qs), _mm256_set1_epi8(8)); }
};
struct Q5_0W {
    static constexpr size_t kBytes = q5_0::bytes, kD = q5_0::d;
    static __m256i ints(const uint8_t *b) {
        const __m256i v = _mm256_or_si256(nibbles32(b + q5_0::qs), high_bits32(b + q5_0::qh, 0x10));
        return _mm256_sub_epi8(v, _mm256_set1_epi8(16));
    }
};
struct Q8_0W {
    static constexpr size_t kBytes = q8_0::bytes, kD = q8_0::d;
    static __m256i ints(const uint8_t *b) { return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b + q8_0::qs)); }
};
struct Q4_1W {
    static constexpr size_t kBytes = q4_1::bytes, kD = q4_1::d, kM = q4_1::m;
    static __m256i ints(const uint8_t *b) { return nibbles32(b + q4_1::qs); }
};
struct Q5_1W {
    static constexpr size_t kBytes = q5_1::bytes, kD = q5_1::d, kM = q5_1::m;
    static __m256i ints(const uint8_t *b) {
        return _mm256_or_si256(nibbles32(b + q5_1::qs), high_bits32(b + q5_1::qh, 0x10));
    }
};

template <typename W>
inline __m256i block_lanes_q8_0(const uint8_t *w, const uint8_t *a) {
    return dot_i8_signed(W::ints(w), _mm256_loadu_si256(reinterpret_cast<const __m256i *>(a + q8_0::qs)));
}
template <typename W>
inline __m256i block_lanes_q8_1(const uint8_t *w, const uint8_t *a) {
    return dot_u8_i8(W::ints(w), _mm256_loadu_si256(reinterpret_cast<const __m256i *>(a + q8_1::qs)));
}

template <typename W>
float dot_q8_0_family(int64_t n, const void *w_row, const void *act) {
    const uint8_t *w = static_cast<const uint8_t *>(w_row);
    const uint8_t *a = static_cast<const uint8_t *>(act);
    const int64_t nb = n / 32;
    __m256 acc = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8, w += 8 * W::kBytes, a += 8 * q8_0::bytes) {
        __m256i s[8];
        for (int j = 0; j < 8; ++j) s[j] = block_lanes_q8_0<W>(w + j * W::kBytes, a + j * q8_0::bytes);
        const __m256 sums = _mm256_cvtepi32_ps(transpose_sum8(s));
        const __m256 d = _mm256_mul_ps(load8_half(w + W::kD, W::kBytes), load8_half(a + q8_0::d, q8_0::bytes));
        acc = _mm256_add_ps(acc, _mm256_mul_ps(sums, d));
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc);
    for (; b < nb; ++b, w += W::kBytes, a += q8_0::bytes) {
        const int32_t sumi = hsum_i32(block_lanes_q8_0<W>(w, a));
        lanes[b & 7] += term_d(sumi, load_half(w + W::kD), load_half(a + q8_0::d));
    }
    return BlockLanes::reduce8(lanes);
}

template <typename W>
float dot_q8_1_family(int64_t n, const void *w_row, const void *act) {
    const uint8_t *w = static_cast<const uint8_t *>(w_row);
    const uint8_t *a = static_cast<const uint8_t *>(act);
    const int64_t nb = n / 32;
    __m256 acc = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8, w += 8 * W::kBytes, a += 8 * q8_1::bytes) {
        __m256i s[8];
        for (int j = 0; j < 8; ++j) s[j] = block_lanes_q8_1<W>(w + j * W::kBytes, a + j * q8_1::bytes);
        const __m256 sums = _mm256_cvtepi32_ps(transpose_sum8(s));
        const __m256 d = _mm256_mul_ps(load8_half(w + W::kD, W::kBytes), load8_half(a + q8_1::d, q8_1::bytes));
        const __m256 ms = _mm256_mul_ps(load8_half(w + W::kM, W::kBytes), load8_half(a + q8_1::s, q8_1::bytes));
        acc = _mm256_add_ps(acc, _mm256_add_ps(_mm256_mul_ps(sums, d), ms));
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc);
    for (; b < nb; ++b, w += W::kBytes, a += q8_1::bytes) {
        const int32_t sumi = hsum_i32(block_lanes_q8_1<W>(w, a));
        lanes[b & 7] += term_dm(sumi, load_half(w + W::kD), load_half(a + q8_1::d), load_half(w + W::kM),
                                load_half(a + q8_1::s));
    }
    return BlockLanes::reduce8(lanes);
}

// --- K-quants against Q8_K ------------------------------------------------------

template <bool kFive>
float dot_q45_k(int64_t n, const void *w_row, const void *act) {
    constexpr size_t kBytes = kFive ? q5_k::bytes : q4_k::bytes;
    constexpr size_t kQs = kFive ? q5_k::qs : q4_k::qs;
    const uint8_t *w = static_cast<const uint8_t *>(w_row);
    const uint8_t *a = static_cast<const uint8_t *>(act);
    BlockLanes acc;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    for (int64_t b = 0; b < n / 256; ++b, w += kBytes, a += q8_k::bytes) {
        uint8_t sc[8], mn[8];
        unpack_k_scales(w + q4_k::scales, sc, mn);
        const int8_t *qa = reinterpret_cast<const int8_t *>(a + q8_k::qs);
        __m256i hbits = kFive ? _mm256_loadu_si256(reinterpret_cast<const __m256i *>(w + q5_k::qh)) : __m256i{};
        __m256i sum = _mm256_setzero_si256();
        for (int k = 0; k < 4; ++k) {
            const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(w + kQs + 32 * k));
            __m256i v0 = _mm256_and_si256(q, low4);
            __m256i v1 = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
            if constexpr (kFive) {
                const __m256i bit = _mm256_set1_epi8(0x10);
                v0 = _mm256_or_si256(v0, _mm256_and_si256(_mm256_slli_epi16(hbits, 4), bit));
                v1 = _mm256_or_si256(v1, _mm256_and_si256(_mm256_slli_epi16(hbits, 3), bit));
                hbits = _mm256_srli_epi16(hbits, 2);
            }
            const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(qa + 64 * k));
            const __m256i a1 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(qa + 64 * k + 32));
            const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(v0, a0), _mm256_set1_epi16(sc[2 * k]));
            const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(v1, a1), _mm256_set1_epi16(sc[2 * k + 1]));
            sum = _mm256_add_epi32(sum, _mm256_add_epi32(p0, p1));
        }
        const int32_t sumi = hsum_i32(sum);
        const int32_t summ = k_min_sum(mn, a + q8_k::bsums);
        acc.add(b, term_k_min(sumi, summ, load_half(w + q4_k::d), load_half(w + q4_k::dmin), load_f32(a + q8_k::d)));
    }
    return acc.total();
}

float dot_q6_k(int64_t n, const void *w_row, const void *act) {
    const uint8_t *w = static_cast<const uint8_t *>(w_row);
    const uint8_t *a = static_cast<const uint8_t *>(act);
    BlockLanes acc;
    const __m256i low4 = _mm256_set1_epi8(0x0F), two = _mm256_set1_epi8(0x30);
    for (int64_t b = 0; b < n / 256; ++b, w += q6_k::bytes, a += q8_k::bytes) {
        const int8_t *qa = reinterpret_cast<const int8_t *>(a + q8_k::qs);
        const int8_t *scales = reinterpret_cast<const int8_t *>(w + q6_k::scales);
        __m256i sum = _mm256_setzero_si256();
        for (int half = 0; half < 2; ++half) {
            const uint8_t *ql = w + q6_k::ql + 64 * half;
            const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(ql));
            const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(ql + 32));
            const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(w + q6_k::qh + 32 * half));
            const __m256i v[4] = {
                _mm256_or_si256(_mm256_and_si256(l0, low4), _mm256_and_si256(_mm256_slli_epi16(h, 4), two)),
                _mm256_or_si256(_mm256_and_si256(l1, low4), _mm256_and_si256(_mm256_slli_epi16(h, 2), two)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), _mm256_and_si256(h, two)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                                _mm256_and_si256(_mm256_srli_epi16(h, 2), two)),
            };
            for (int q = 0; q < 4; ++q) {
                const int g = 8 * half + 2 * q;  // groups g (elements 0..15) and g+1 (16..31)
                const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(qa + 128 * half + 32 * q));
                const __m256i sc = _mm256_setr_m128i(_mm_set1_epi16(scales[g]), _mm_set1_epi16(scales[g + 1]));
                sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(v[q], av), sc));
            }
        }
        // The weights are stored +32: subtract 32 * sum_g sc_g * bsum_g.
        const int32_t sumi = hsum_i32(sum) - 32 * q6_scale_bsum(scales, a + q8_k::bsums);
        acc.add(b, term_k(sumi, load_half(w + q6_k::d), load_f32(a + q8_k::d)));
    }
    return acc.total();
}

// --- float rows ------------------------------------------------------------------

template <FloatKind K>
float dot_float(int64_t n, const void *w_row, const void *act) {
    constexpr size_t e = kElemBytes<K>;
    const uint8_t *w = static_cast<const uint8_t *>(w_row);
    const uint8_t *a = static_cast<const uint8_t *>(act);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; ++k)
            acc[k] = _mm256_fmadd_ps(load8<K>(w + (i + 8 * k) * e), load8<K>(a + (i + 8 * k) * e), acc[k]);
    alignas(32) float lanes[32];
    for (int k = 0; k < 4; ++k) _mm256_store_ps(lanes + 8 * k, acc[k]);
    return finish_float_lanes<K>(lanes, i, n, w, a);
}

}  // namespace

void fill_avx2_kernels(KernelTable &t) {
    auto set = [&](GgmlType type, DotFn fn) { t.type[static_cast<uint32_t>(type)].dot = fn; };
    set(GgmlType::F32, dot_float<FloatKind::f32>);
    set(GgmlType::F16, dot_float<FloatKind::f16>);
    set(GgmlType::BF16, dot_float<FloatKind::bf16>);
    set(GgmlType::Q4_0, dot_q8_0_family<Q4_0W>);
    set(GgmlType::Q5_0, dot_q8_0_family<Q5_0W>);
    set(GgmlType::Q8_0, dot_q8_0_family<Q8_0W>);
    set(GgmlType::Q4_1, dot_q8_1_family<Q4_1W>);
    set(GgmlType::Q5_1, dot_q8_1_family<Q5_1W>);
    set(GgmlType::Q4_K, dot_q45_k<false>);
    set(GgmlType::Q5_K, dot_q45_k<true>);
    set(GgmlType::Q6_K, dot_q6_k);
}

}  // namespace moe::kernels::detail
