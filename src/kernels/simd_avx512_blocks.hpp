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
// Eight vectors of 16 int32 partial sums -> lane j = total of x[j].
MOE_ALWAYS_INLINE __m256i total8(const __m512i *x) {
    __m512i p[4];  // 128-bit lanes: partials of x[2i], x[2i+1], x[2i], x[2i+1]
    for (int i = 0; i < 4; ++i)
        p[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(x[2 * i], x[2 * i + 1]),
                                _mm512_unpackhi_epi32(x[2 * i], x[2 * i + 1]));
    __m512i q[2];  // 128-bit lanes: partials of x[4k] .. x[4k+3]
    for (int k = 0; k < 2; ++k)
        q[k] = _mm512_add_epi32(_mm512_unpacklo_epi64(p[2 * k], p[2 * k + 1]),
                                _mm512_unpackhi_epi64(p[2 * k], p[2 * k + 1]));
    // 128-bit lanes 0, 1: partials of x[0..3]; 2, 3: of x[4..7].
    const __m512i r = _mm512_add_epi32(_mm512_shuffle_i64x2(q[0], q[1], 0x88), _mm512_shuffle_i64x2(q[0], q[1], 0xDD));
    const __m512i total = _mm512_add_epi32(_mm512_shuffle_i64x2(r, r, 0x08), _mm512_shuffle_i64x2(r, r, 0x0D));
    return _mm512_castsi512_si256(total);
}

// total8 of a group's partial sums folded in as they are produced (the
// K-quant row loop's D::Fold): add<J>(s) takes block J's partials, one level
// of the network per pair of blocks, so at most three vectors stay live.
struct Fold512 {
    __m512i even, pair, quad[2];
    template <int J>
    MOE_ALWAYS_INLINE void add(__m512i s) {
        if constexpr (J % 2 == 0) {
            even = s;
        } else {
            const __m512i pr = _mm512_add_epi32(_mm512_unpacklo_epi32(even, s), _mm512_unpackhi_epi32(even, s));
            if constexpr (J % 4 == 1) pair = pr;
            else quad[J / 4] = _mm512_add_epi32(_mm512_unpacklo_epi64(pair, pr), _mm512_unpackhi_epi64(pair, pr));
        }
    }
    // Lane j = the total of block j.
    MOE_ALWAYS_INLINE __m256i total() const {
        const __m512i r = _mm512_add_epi32(_mm512_shuffle_i64x2(quad[0], quad[1], 0x88),
                                           _mm512_shuffle_i64x2(quad[0], quad[1], 0xDD));
        return _mm512_castsi512_si256(_mm512_add_epi32(_mm512_shuffle_i64x2(r, r, 0x08), _mm512_shuffle_i64x2(r, r, 0x0D)));
    }
};

// 512-bit K-quant registers of 64 elements (128-bit lane L of register r =
// 16-element group 4r + L) are dotted by vpdpbusd into int32 sums of 4
// products, packed in pairs of registers (0, 1 and 2, 3) into int16 by
// vpackssdw and multiplied by the group scales with vpdpwssd.
// int16 lane p of 128-bit lane L of packed pair k takes the scale of group
// 8k + L (p < 4) or 8k + 4 + L (p >= 4).
constexpr std::array<int16_t, 64> group_pair_index() {
    std::array<int16_t, 64> c{};
    for (int k = 0; k < 2; ++k)
        for (int l = 0; l < 4; ++l)
            for (int p = 0; p < 8; ++p) c[32 * k + 8 * l + p] = static_cast<int16_t>(8 * k + l + (p < 4 ? 0 : 4));
    return c;
}

// Sixteen int16 group scales -> the vpdpwssd operands of packed pairs 0 and 1.
MOE_ALWAYS_INLINE void group_pair_scales(__m256i sc16, __m512i *out) {
    static constexpr std::array<int16_t, 64> kGroupOf = group_pair_index();
    const __m512i scz = _mm512_zextsi256_si512(sc16);
    for (int i = 0; i < 2; ++i) out[i] = _mm512_permutexvar_epi16(_mm512_loadu_si512(kGroupOf.data() + 32 * i), scz);
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
