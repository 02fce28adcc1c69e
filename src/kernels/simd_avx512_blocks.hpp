// AVX-512 building blocks, included only by the AVX-512 kernel files
// (compiled with F/BW/VL/DQ/VNNI). Internal linkage on purpose.
#pragma once

#include <immintrin.h>

#include <array>
#include <cstdint>

#include "kernels/quant_rows.hpp"

namespace moe::kernels::detail {
namespace {

struct DotVnni {
    MOE_ALWAYS_INLINE static __m256i run(__m256i u, __m256i a) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, a); }
};

MOE_ALWAYS_INLINE __m512i load512(const uint8_t *p) { return _mm512_loadu_si512(p); }
// A 512-bit load the compiler may not repeat: a value used by several
// operations would otherwise have its load folded into each of them, and
// the weight loads of 84-, 110- and 136-byte blocks mostly cross two cache
// lines, which this core serves at one load per cycle instead of two.
MOE_ALWAYS_INLINE __m512i load512_once(const uint8_t *p) {
    __m512i v = _mm512_loadu_si512(p);
    asm("" : "+v"(v));
    return v;
}
// The 512-bit network of Fold (simd_avx2_blocks.hpp): 32-bit and then 64-bit
// unpacks added, then the 128-bit lanes of the two quads.
struct Sum512 {
    using V = __m512i;
    // The 32-bit lanes of each 128-bit lane: partials of a, b, a, b.
    MOE_ALWAYS_INLINE static __m512i pair(__m512i a, __m512i b) {
        return _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
    }
    // Each 128-bit lane: partials of the four vectors of pairs a and b.
    MOE_ALWAYS_INLINE static __m512i quad(__m512i a, __m512i b) {
        return _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
    }
    MOE_ALWAYS_INLINE static __m256i total(__m512i q0, __m512i q1) {
        // 128-bit lanes 0, 1: partials of vectors 0..3; 2, 3: of 4..7.
        const __m512i r = _mm512_add_epi32(_mm512_shuffle_i64x2(q0, q1, 0x88), _mm512_shuffle_i64x2(q0, q1, 0xDD));
        return _mm512_castsi512_si256(_mm512_add_epi32(_mm512_shuffle_i64x2(r, r, 0x08), _mm512_shuffle_i64x2(r, r, 0x0D)));
    }
};
using Fold512 = Fold<Sum512>;

// Eight vectors of 16 int32 partial sums -> lane j = total of x[j].
MOE_ALWAYS_INLINE __m256i total8(const __m512i *x) { return sum8<Sum512>(x); }

// 512-bit K-quant registers of 64 elements (128-bit lane L of register r =
// 16-element group 4r + L) are dotted by vpdpbusd into int32 sums of 4
// products, packed in pairs of registers (0, 1 and 2, 3) into int16 by
// vpackssdw and multiplied by the group scales with vpdpwssd.
// ConsecutiveGroups::group(r, L) is that group; a decoder whose registers
// hold other groups (Q3_K) gives group_pair_scales its own Layout::group.
struct ConsecutiveGroups {
    static constexpr int group(int r, int l) { return 4 * r + l; }
};

// int16 lane p of 128-bit lane L of packed pair k takes the scale of the
// group of register 2k (p < 4) or 2k + 1 (p >= 4) in that lane, from int16
// lanes kFirst..kFirst + 15 of the scales.
template <typename Layout, int kFirst>
constexpr std::array<int16_t, 64> group_pair_index() {
    std::array<int16_t, 64> c{};
    for (int k = 0; k < 2; ++k)
        for (int l = 0; l < 4; ++l)
            for (int p = 0; p < 8; ++p)
                c[32 * k + 8 * l + p] = static_cast<int16_t>(kFirst + Layout::group(2 * k + p / 4, l));
    return c;
}

// Sixteen int16 group scales (int16 lanes kFirst.. of sc) -> the vpdpwssd
// operands of packed pairs 0 and 1.
template <typename Layout = ConsecutiveGroups, int kFirst = 0>
MOE_ALWAYS_INLINE void group_pair_scales(__m512i sc, __m512i *out) {
    static constexpr std::array<int16_t, 64> kGroupOf = group_pair_index<Layout, kFirst>();
    for (int i = 0; i < 2; ++i) out[i] = _mm512_permutexvar_epi16(_mm512_loadu_si512(kGroupOf.data() + 32 * i), sc);
}
template <typename Layout = ConsecutiveGroups>
MOE_ALWAYS_INLINE void group_pair_scales(__m256i sc16, __m512i *out) {
    group_pair_scales<Layout, 0>(_mm512_zextsi256_si512(sc16), out);
}

// The 16 bytes at w, w + stride, w + 2 stride and w + 3 stride, one per
// 128-bit lane (the heads of four blocks).
MOE_ALWAYS_INLINE __m512i blocks4_128(const uint8_t *w, size_t stride) {
    __m512i x = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i *>(w)));
    x = _mm512_inserti32x4(x, _mm_loadu_si128(reinterpret_cast<const __m128i *>(w + stride)), 1);
    x = _mm512_inserti32x4(x, _mm_loadu_si128(reinterpret_cast<const __m128i *>(w + 2 * stride)), 2);
    return _mm512_inserti32x4(x, _mm_loadu_si128(reinterpret_cast<const __m128i *>(w + 3 * stride)), 3);
}

// Dword K of every 128-bit lane of x0 and then of x1 (blocks4_128 of eight
// blocks): a 32-bit field of the eight blocks, without the stack array that
// scalars of each block would go through (whose vector load waits for the
// eight stores to leave the store queue).
template <int K>
MOE_ALWAYS_INLINE __m256i lane_words8(__m512i x0, __m512i x1) {
    return _mm512_castsi512_si256(_mm512_permutex2var_epi32(
        x0, _mm512_setr_epi32(K, 4 + K, 8 + K, 12 + K, 16 + K, 20 + K, 24 + K, 28 + K, 0, 0, 0, 0, 0, 0, 0, 0), x1));
}

// sum_g sc_g * <v_g, qa_g> (+ the correction vector acc) over the four
// registers; q: the activation's 256 quants (in the order the decoder's
// registers hold the weights).
MOE_ALWAYS_INLINE __m512i group_sums512(const __m512i *v, const __m512i *sc, const uint8_t *q, __m512i acc) {
    const __m512i zero = _mm512_setzero_si512();
    __m512i s[4];
    for (int r = 0; r < 4; ++r) s[r] = _mm512_dpbusd_epi32(zero, v[r], load512(q + 64 * r));
    acc = _mm512_dpwssd_epi32(acc, _mm512_packs_epi32(s[0], s[1]), sc[0]);
    return _mm512_dpwssd_epi32(acc, _mm512_packs_epi32(s[2], s[3]), sc[1]);
}

// The same with the block's offset correction (Q3_K, Q6_K: corr holds the
// offset times each group's scale) applied to the activation's 16 group sums.
template <typename Block>
MOE_ALWAYS_INLINE __m512i corrected_group_sums512(const Block &k, const uint8_t *act) {
    const __m512i bsums = _mm512_zextsi256_si512(load256(act + q8_k::bsums));
    return group_sums512(k.v, k.sc, act + q8_k::qs, _mm512_dpwssd_epi32(_mm512_setzero_si512(), bsums, k.corr));
}

// The frame of a decoder of 512-bit K-quant registers (KRows' / KRowsUnrolled's D).
template <size_t kBlockBytes, bool kHasMins>
struct KDecoder512 {
    static constexpr size_t kBytes = kBlockBytes;
    static constexpr bool kMins = kHasMins, kArranged = false;
    using Partial = __m512i;
    using Fold = Fold512;
    MOE_ALWAYS_INLINE static __m256i total8(const __m512i *x) { return moe::kernels::detail::total8(x); }
    // Four registers of quants and the scales of the two packed pairs.
    struct Block {
        __m512i v[4];
        __m512i sc[2];
    };
    struct CorrBlock : Block {
        __m512i corr;  // int16 lanes 0..15: the correction per group against the activation sums
    };
};

}  // namespace
}  // namespace moe::kernels::detail
