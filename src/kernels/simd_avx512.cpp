// AVX-512 (F/BW/VL/VNNI) kernels. Same integer block sums and the same float
// operations in the same order as the scalar reference, so results are
// bit-identical to it.
//
// Legacy formats use 256-bit VNNI (vpdpbusd: unsigned weights x signed
// activations). Weights are made unsigned by an offset (Q4_0 +8, Q5_0 +16,
// Q8_0 +128) whose contribution offset * sum(activation block) is subtracted;
// those sums and the activation scales are prepared once per activation row
// and shared by every weight row. Q4_0/Q4_1/Q5_0/Q5_1 take four blocks per 512-bit
// register against a rearranged copy of the activation row. K-quants use
// 512-bit multiply-adds.

// GCC 12's AVX-512 headers start some intrinsics from a deliberately
// undefined register value and then warn about it.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cmath>

#include "kernels/blocks.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/dot_terms.hpp"
#include "kernels/simd_avx2_blocks.hpp"

namespace moe::kernels::detail {
namespace {

using namespace avx2;

// --- legacy blocks ------------------------------------------------------------

struct Q4_0U {
    static constexpr size_t kBytes = q4_0::bytes, kD = q4_0::d, kQs = q4_0::qs, kQh = 0;
    static constexpr int32_t kOffset = 8;
    static constexpr bool kSplit = true, kFive = false;
    static __m256i uints(const uint8_t *b) { return nibbles32(b + q4_0::qs); }
};
struct Q5_0U {
    static constexpr size_t kBytes = q5_0::bytes, kD = q5_0::d, kQs = q5_0::qs, kQh = q5_0::qh;
    static constexpr int32_t kOffset = 16;
    static constexpr bool kSplit = true, kFive = true;
    static __m256i uints(const uint8_t *b) {
        return _mm256_or_si256(nibbles32(b + q5_0::qs), high_bits32(b + q5_0::qh, 0x10));
    }
};
struct Q8_0U {
    static constexpr size_t kBytes = q8_0::bytes, kD = q8_0::d;
    static constexpr int32_t kOffset = 128;
    static constexpr bool kSplit = false;
    static __m256i uints(const uint8_t *b) {
        return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(b + q8_0::qs)),
                                _mm256_set1_epi8(static_cast<char>(0x80)));
    }
};
struct Q4_1U {
    static constexpr size_t kBytes = q4_1::bytes, kD = q4_1::d, kM = q4_1::m, kQs = q4_1::qs, kQh = 0;
    static constexpr bool kSplit = true, kFive = false;
    static __m256i uints(const uint8_t *b) { return nibbles32(b + q4_1::qs); }
};
struct Q5_1U {
    static constexpr size_t kBytes = q5_1::bytes, kD = q5_1::d, kM = q5_1::m, kQs = q5_1::qs, kQh = q5_1::qh;
    static constexpr bool kSplit = true, kFive = true;
    static __m256i uints(const uint8_t *b) {
        return _mm256_or_si256(nibbles32(b + q5_1::qs), high_bits32(b + q5_1::qh, 0x10));
    }
};

inline __m256i vnni(__m256i u, const uint8_t *a) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u,
                               _mm256_loadu_si256(reinterpret_cast<const __m256i *>(a)));
}

// Nibble formats (Q4_0, Q4_1, and Q5_0, Q5_1 with their fifth bits) take four blocks per 512-bit register: the
// activation row is rearranged once so that, per group of 4 blocks, the first
// halves (elements 0..15, met by low nibbles) and the second halves (16..31,
// high nibbles) are each 64 contiguous bytes.
inline void split_halves(const uint8_t *act, size_t blk_bytes, size_t qs, int64_t nb, uint8_t *out) {
    for (int64_t g = 0; g + 4 <= nb; g += 4) {
        uint8_t *o = out + g * 32;
        for (int j = 0; j < 4; ++j) {
            const uint8_t *q = act + (g + j) * blk_bytes + qs;
            std::memcpy(o + 16 * j, q, 16);
            std::memcpy(o + 64 + 16 * j, q + 16, 16);
        }
    }
}

// Integer sums of 8 nibble blocks (unsigned weights) against split activations.
template <typename W>
inline __m256i sums8_split(const uint8_t *w, const uint8_t *split) {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    __m512i x[2];
    for (int h = 0; h < 2; ++h) {
        const uint8_t *wb = w + 4 * h * W::kBytes + W::kQs;
        __m512i q = _mm512_zextsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i *>(wb)));
        q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i *>(wb + W::kBytes)), 1);
        q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i *>(wb + 2 * W::kBytes)), 2);
        q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i *>(wb + 3 * W::kBytes)), 3);
        __m512i lo = _mm512_and_si512(q, low4);
        __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
        if constexpr (W::kFive) {
            // Fifth bits: 128-bit lane j holds block j's 32-bit qh four times;
            // element i (< 16) of the lane tests bit i, of the high half bit 16 + i.
            const uint8_t *hb = w + 4 * h * W::kBytes + W::kQh;
            const __m128i words = _mm_setr_epi32(static_cast<int>(load_u32(hb)), static_cast<int>(load_u32(hb + W::kBytes)),
                                                 static_cast<int>(load_u32(hb + 2 * W::kBytes)),
                                                 static_cast<int>(load_u32(hb + 3 * W::kBytes)));
            const __m512i rep = _mm512_permutexvar_epi32(
                _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3), _mm512_zextsi128_si512(words));
            const __m512i sel_lo = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
            const __m512i sel_hi = _mm512_broadcast_i32x4(_mm_setr_epi8(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
            const __m512i bits = _mm512_set1_epi64(static_cast<long long>(0x8040201008040201ull));
            const __m512i bit4 = _mm512_set1_epi8(0x10);
            const __mmask64 mlo = _mm512_test_epi8_mask(_mm512_shuffle_epi8(rep, sel_lo), bits);
            const __mmask64 mhi = _mm512_test_epi8_mask(_mm512_shuffle_epi8(rep, sel_hi), bits);
            lo = _mm512_mask_blend_epi8(mlo, lo, _mm512_or_si512(lo, bit4));
            hi = _mm512_mask_blend_epi8(mhi, hi, _mm512_or_si512(hi, bit4));
        }
        const uint8_t *s = split + 128 * h;
        __m512i acc = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_loadu_si512(s));
        acc = _mm512_dpbusd_epi32(acc, hi, _mm512_loadu_si512(s + 64));
        // Each 128-bit lane holds one block: total it into every element.
        acc = _mm512_add_epi32(acc, _mm512_shuffle_epi32(acc, static_cast<_MM_PERM_ENUM>(0xB1)));
        x[h] = _mm512_add_epi32(acc, _mm512_shuffle_epi32(acc, static_cast<_MM_PERM_ENUM>(0x4E)));
    }
    const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_castsi512_si256(_mm512_permutex2var_epi32(x[0], idx, x[1]));
}

// One activation row prepared for the Q8_0 family: f32 scales and
// offset * sum(q) per block.
struct PrepQ8_0 {
    const uint8_t *act;
    const float *d;
    const int32_t *corr;
    const uint8_t *split;  // nibble formats only
};

template <typename W>
PrepQ8_0 prep_q8_0(const uint8_t *act, int64_t nb, float *d, int32_t *corr, uint8_t *split) {
    const __m256i ones = _mm256_set1_epi8(1);
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t *blk = act + b * q8_0::bytes;
        d[b] = load_half(blk + q8_0::d);
        corr[b] = W::kOffset * hsum_i32(vnni(ones, blk + q8_0::qs));
    }
    if constexpr (W::kSplit) split_halves(act, q8_0::bytes, q8_0::qs, nb, split);
    return {act, d, corr, split};
}

template <typename W>
float row_q8_0(const uint8_t *w, const PrepQ8_0 &p, int64_t nb) {
    const uint8_t *a = p.act;
    __m256 acc = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8, w += 8 * W::kBytes, a += 8 * q8_0::bytes) {
        __m256i raw;
        if constexpr (W::kSplit) {
            raw = sums8_split<W>(w, p.split + b * 32);
        } else {
            __m256i s[8];
            for (int j = 0; j < 8; ++j) s[j] = vnni(W::uints(w + j * W::kBytes), a + j * q8_0::bytes + q8_0::qs);
            raw = transpose_sum8(s);
        }
        const __m256i sumi = _mm256_sub_epi32(raw, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p.corr + b)));
        const __m256 d = _mm256_mul_ps(load8_half(w + W::kD, W::kBytes), _mm256_loadu_ps(p.d + b));
        acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(sumi), d));
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc);
    for (; b < nb; ++b, w += W::kBytes, a += q8_0::bytes) {
        const int32_t sumi = hsum_i32(vnni(W::uints(w), a + q8_0::qs)) - p.corr[b];
        lanes[b & 7] += term_d(sumi, load_half(w + W::kD), p.d[b]);
    }
    return BlockLanes::reduce8(lanes);
}

struct PrepQ8_1 {
    const uint8_t *act;
    const float *d;
    const float *s;
    const uint8_t *split;  // nibble formats only
};

template <typename W>
PrepQ8_1 prep_q8_1(const uint8_t *act, int64_t nb, float *d, float *s, uint8_t *split) {
    for (int64_t b = 0; b < nb; ++b) {
        d[b] = load_half(act + b * q8_1::bytes + q8_1::d);
        s[b] = load_half(act + b * q8_1::bytes + q8_1::s);
    }
    if constexpr (W::kSplit) split_halves(act, q8_1::bytes, q8_1::qs, nb, split);
    return {act, d, s, split};
}

template <typename W>
float row_q8_1(const uint8_t *w, const PrepQ8_1 &p, int64_t nb) {
    const uint8_t *a = p.act;
    __m256 acc = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8, w += 8 * W::kBytes, a += 8 * q8_1::bytes) {
        __m256i raw;
        if constexpr (W::kSplit) {
            raw = sums8_split<W>(w, p.split + b * 32);
        } else {
            __m256i s[8];
            for (int j = 0; j < 8; ++j) s[j] = vnni(W::uints(w + j * W::kBytes), a + j * q8_1::bytes + q8_1::qs);
            raw = transpose_sum8(s);
        }
        const __m256 sums = _mm256_cvtepi32_ps(raw);
        const __m256 d = _mm256_mul_ps(load8_half(w + W::kD, W::kBytes), _mm256_loadu_ps(p.d + b));
        const __m256 ms = _mm256_mul_ps(load8_half(w + W::kM, W::kBytes), _mm256_loadu_ps(p.s + b));
        acc = _mm256_add_ps(acc, _mm256_add_ps(_mm256_mul_ps(sums, d), ms));
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc);
    for (; b < nb; ++b, w += W::kBytes, a += q8_1::bytes) {
        const int32_t sumi = hsum_i32(vnni(W::uints(w), a + q8_1::qs));
        lanes[b & 7] += term_dm(sumi, load_half(w + W::kD), p.d[b], load_half(w + W::kM), p.s[b]);
    }
    return BlockLanes::reduce8(lanes);
}

// Matvec / matmat / dot over a prepared-row kernel. Prep works in the
// per-thread scratch; every token's activation row is prepared once.
template <typename Prep, typename PrepFn, typename RowFn>
struct PreparedKernels {
    static void matmat(int64_t n, const uint8_t *w, size_t row_bytes, const void *act, size_t act_stride,
                       int32_t n_tokens, float *y, size_t y_stride, int64_t r0, int64_t r1) {
        const int64_t nb = n / 32;
        // Per token: two float/int arrays of nb (+ padding) and nb * 32 split bytes.
        const size_t fields = 2 * 4 * static_cast<size_t>(nb + 16);
        const size_t per_token = (fields + 32 * static_cast<size_t>(nb) + 63) / 64 * 64;
        const size_t head = (static_cast<size_t>(n_tokens) * sizeof(Prep) + 63) / 64 * 64;
        auto *scratch = static_cast<uint8_t *>(kernel_scratch(head + static_cast<size_t>(n_tokens) * per_token));
        Prep *preps = reinterpret_cast<Prep *>(scratch);
        for (int32_t t = 0; t < n_tokens; ++t) {
            uint8_t *space = scratch + head + static_cast<size_t>(t) * per_token;
            float *f0 = reinterpret_cast<float *>(space);
            preps[t] = PrepFn::run(static_cast<const uint8_t *>(act) + t * act_stride, nb, f0, f0 + nb + 16,
                                   space + fields);
        }
        for (int64_t r = r0; r < r1; ++r)
            for (int32_t t = 0; t < n_tokens; ++t) y[t * y_stride + r] = RowFn::run(w + r * row_bytes, preps[t], nb);
    }
    static void matvec(int64_t n, const uint8_t *w, size_t row_bytes, const void *act, float *y, int64_t r0,
                       int64_t r1) {
        // matvec is matmat with one token; y is offset so y[r - r0] lands right.
        matmat(n, w, row_bytes, act, 0, 1, y - r0, 0, r0, r1);
    }
    static float dot(int64_t n, const void *w_row, const void *act) {
        float y;
        matvec(n, static_cast<const uint8_t *>(w_row), 0, act, &y, 0, 1);
        return y;
    }
};

template <typename W>
struct PrepQ8_0Fn {
    static PrepQ8_0 run(const uint8_t *act, int64_t nb, float *d, float *corr, uint8_t *split) {
        return prep_q8_0<W>(act, nb, d, reinterpret_cast<int32_t *>(corr), split);
    }
};
template <typename W>
struct RowQ8_0Fn {
    static float run(const uint8_t *w, const PrepQ8_0 &p, int64_t nb) { return row_q8_0<W>(w, p, nb); }
};
template <typename W>
struct PrepQ8_1Fn {
    static PrepQ8_1 run(const uint8_t *act, int64_t nb, float *d, float *s, uint8_t *split) {
        return prep_q8_1<W>(act, nb, d, s, split);
    }
};
template <typename W>
struct RowQ8_1Fn {
    static float run(const uint8_t *w, const PrepQ8_1 &p, int64_t nb) { return row_q8_1<W>(w, p, nb); }
};

template <typename W>
using Q8_0Kernels = PreparedKernels<PrepQ8_0, PrepQ8_0Fn<W>, RowQ8_0Fn<W>>;
template <typename W>
using Q8_1Kernels = PreparedKernels<PrepQ8_1, PrepQ8_1Fn<W>, RowQ8_1Fn<W>>;

// --- K-quants (512-bit) ---------------------------------------------------------

// int16 lanes: lanes 0..15 take scale 2k, lanes 16..31 scale 2k+1.
inline __m512i pair_scales(__m512i scales16, int k) {
    const __m512i idx = _mm512_inserti64x4(_mm512_zextsi256_si512(_mm256_set1_epi16(static_cast<short>(2 * k))),
                                           _mm256_set1_epi16(static_cast<short>(2 * k + 1)), 1);
    return _mm512_permutexvar_epi16(idx, scales16);
}

inline __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_zextsi256_si512(lo), hi, 1); }

template <bool kFive>
float dot_q45_k(int64_t n, const void *w_row, const void *act) {
    constexpr size_t kBytes = kFive ? q5_k::bytes : q4_k::bytes;
    constexpr size_t kQs = kFive ? q5_k::qs : q4_k::qs;
    const uint8_t *w = static_cast<const uint8_t *>(w_row);
    const uint8_t *a = static_cast<const uint8_t *>(act);
    BlockLanes acc;
    const __m512i low4 = _mm512_set1_epi8(0x0F), bit4 = _mm512_set1_epi8(0x10);
    for (int64_t b = 0; b < n / 256; ++b, w += kBytes, a += q8_k::bytes) {
        uint8_t sc[8], mn[8];
        unpack_k_scales(w + q4_k::scales, sc, mn);
        const __m512i scales16 =
            _mm512_zextsi128_si512(_mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(sc))));
        const int8_t *qa = reinterpret_cast<const int8_t *>(a + q8_k::qs);
        __m512i hz{};
        if constexpr (kFive) {
            const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(w + q5_k::qh));
            hz = join(hb, _mm256_srli_epi16(hb, 1));
        }
        __m512i sum = _mm512_setzero_si512();
        for (int k = 0; k < 4; ++k) {
            const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(w + kQs + 32 * k));
            __m512i v = _mm512_and_si512(join(q, _mm256_srli_epi16(q, 4)), low4);
            if constexpr (kFive) {
                v = _mm512_or_si512(v, _mm512_and_si512(_mm512_slli_epi16(hz, 4), bit4));
                hz = _mm512_srli_epi16(hz, 2);
            }
            const __m512i av = _mm512_loadu_si512(qa + 64 * k);
            sum = _mm512_add_epi32(sum, _mm512_madd_epi16(_mm512_maddubs_epi16(v, av), pair_scales(scales16, k)));
        }
        const int32_t sumi = _mm512_reduce_add_epi32(sum);
        const int32_t summ = k_min_sum(mn, a + q8_k::bsums);
        acc.add(b, term_k_min(sumi, summ, load_half(w + q4_k::d), load_half(w + q4_k::dmin), load_f32(a + q8_k::d)));
    }
    return acc.total();
}

float dot_q6_k(int64_t n, const void *w_row, const void *act) {
    const uint8_t *w = static_cast<const uint8_t *>(w_row);
    const uint8_t *a = static_cast<const uint8_t *>(act);
    BlockLanes acc;
    const __m512i low4 = _mm512_set1_epi8(0x0F), two = _mm512_set1_epi8(0x30);
    // int16 lanes 0..7, 8..15, 16..23, 24..31 take scales g, g+1, g+2, g+3.
    const __m512i quad = _mm512_inserti64x4(
        _mm512_zextsi256_si512(_mm256_setr_m128i(_mm_set1_epi16(0), _mm_set1_epi16(1))),
        _mm256_setr_m128i(_mm_set1_epi16(2), _mm_set1_epi16(3)), 1);
    for (int64_t b = 0; b < n / 256; ++b, w += q6_k::bytes, a += q8_k::bytes) {
        const int8_t *qa = reinterpret_cast<const int8_t *>(a + q8_k::qs);
        const int8_t *scales = reinterpret_cast<const int8_t *>(w + q6_k::scales);
        const __m512i sc16 =
            _mm512_zextsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(scales))));
        __m512i sum = _mm512_setzero_si512();
        for (int half = 0; half < 2; ++half) {
            const __m512i l = _mm512_loadu_si512(w + q6_k::ql + 64 * half);
            const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(w + q6_k::qh + 32 * half));
            const __m512i h01 = _mm512_and_si512(join(_mm256_slli_epi16(h, 4), _mm256_slli_epi16(h, 2)), two);
            const __m512i h23 = _mm512_and_si512(join(h, _mm256_srli_epi16(h, 2)), two);
            const __m512i v01 = _mm512_or_si512(_mm512_and_si512(l, low4), h01);
            const __m512i v23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), low4), h23);
            const __m512i s01 = _mm512_permutexvar_epi16(_mm512_add_epi16(quad, _mm512_set1_epi16(static_cast<short>(8 * half))), sc16);
            const __m512i s23 = _mm512_permutexvar_epi16(_mm512_add_epi16(quad, _mm512_set1_epi16(static_cast<short>(8 * half + 4))), sc16);
            const __m512i a01 = _mm512_loadu_si512(qa + 128 * half);
            const __m512i a23 = _mm512_loadu_si512(qa + 128 * half + 64);
            sum = _mm512_add_epi32(sum, _mm512_madd_epi16(_mm512_maddubs_epi16(v01, a01), s01));
            sum = _mm512_add_epi32(sum, _mm512_madd_epi16(_mm512_maddubs_epi16(v23, a23), s23));
        }
        const int32_t sumi = _mm512_reduce_add_epi32(sum) - 32 * q6_scale_bsum(scales, a + q8_k::bsums);
        acc.add(b, term_k(sumi, load_half(w + q6_k::d), load_f32(a + q8_k::d)));
    }
    return acc.total();
}

// --- float rows ------------------------------------------------------------------

template <FloatKind K>
inline __m512 load16(const uint8_t *p) {
    if constexpr (K == FloatKind::f32) return _mm512_loadu_ps(p);
    else if constexpr (K == FloatKind::f16)
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
    else
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p))), 16));
}

template <FloatKind K>
float dot_float(int64_t n, const void *w_row, const void *act) {
    constexpr size_t e = kElemBytes<K>;
    const uint8_t *w = static_cast<const uint8_t *>(w_row);
    const uint8_t *a = static_cast<const uint8_t *>(act);
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm512_fmadd_ps(load16<K>(w + i * e), load16<K>(a + i * e), acc0);
        acc1 = _mm512_fmadd_ps(load16<K>(w + (i + 16) * e), load16<K>(a + (i + 16) * e), acc1);
    }
    alignas(64) float lanes[32];
    _mm512_store_ps(lanes, acc0);
    _mm512_store_ps(lanes + 16, acc1);
    return finish_float_lanes<K>(lanes, i, n, w, a);
}

template <typename Kn>
void set_prepared(KernelTable &t, GgmlType type) {
    TypeKernels &k = t.type[static_cast<uint32_t>(type)];
    k.dot = Kn::dot;
    k.matvec = Kn::matvec;
    k.matmat = Kn::matmat;
}

}  // namespace

void fill_avx512_kernels(KernelTable &t) {
    auto set = [&](GgmlType type, DotFn fn) { t.type[static_cast<uint32_t>(type)].dot = fn; };
    set(GgmlType::F32, dot_float<FloatKind::f32>);
    set(GgmlType::F16, dot_float<FloatKind::f16>);
    set(GgmlType::BF16, dot_float<FloatKind::bf16>);
    set_prepared<Q8_0Kernels<Q4_0U>>(t, GgmlType::Q4_0);
    set_prepared<Q8_0Kernels<Q5_0U>>(t, GgmlType::Q5_0);
    set_prepared<Q8_0Kernels<Q8_0U>>(t, GgmlType::Q8_0);
    set_prepared<Q8_1Kernels<Q4_1U>>(t, GgmlType::Q4_1);
    set_prepared<Q8_1Kernels<Q5_1U>>(t, GgmlType::Q5_1);
    set(GgmlType::Q4_K, dot_q45_k<false>);
    set(GgmlType::Q5_K, dot_q45_k<true>);
    set(GgmlType::Q6_K, dot_q6_k);
}

bool isa_has_kernels(Isa) { return true; }

}  // namespace moe::kernels::detail
