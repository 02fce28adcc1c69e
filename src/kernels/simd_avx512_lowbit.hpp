// 512-bit decoders of Q2_K, Q3_K and IQ4_XS super-blocks for the K-quant
// row loop (quant_rows.hpp KRows), included by the AVX-512 kernel file. The
// block heads (scales, mins, fp16 fields) are decoded as the 256-bit
// decoders do (simd_lowbit_blocks.hpp); the quants take four 512-bit
// registers of 64 elements instead of eight of 32.
//
// Q2_K / Q3_K: register r = elements 64r..64r+63 (128-bit lane L = group
// 4r + L), dotted as simd_avx512_blocks.hpp describes (|4-product sum| <=
// 4 * 7 * 127, int16 range). IQ4_XS: register r = sub-blocks 2r (low half)
// and 2r + 1 (high half); level magnitudes meet the activations with the
// level's sign (a masked negation), and vpmaddubsw's int16 pair sums
// (<= 2 * 127 * 127) meet the sub-block scales in vpdpwssd.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/simd_avx512_blocks.hpp"
#include "kernels/simd_lowbit_blocks.hpp"

namespace moe::kernels::detail {
namespace {

// Register 2n + h: bits 4h..4h+1 (low half) and 4h+2..4h+3 (high half) of
// quant bytes 32n..32n+31, from one broadcast load.
MOE_ALWAYS_INLINE void two_bit_fields512(const uint8_t *qs, __m512i *v) {
    const __m512i three = _mm512_set1_epi8(3);
    for (int n = 0; n < 2; ++n) {
        const __m256i q = load256(qs + 32 * n);
        const __m512i qq = _mm512_inserti64x4(_mm512_castsi256_si512(q), q, 1);
        for (int h = 0; h < 2; ++h) {
            const __m512i shift = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<short>(4 * h)),
                                                     _mm256_set1_epi16(static_cast<short>(4 * h + 2)), 1);
            v[2 * n + h] = _mm512_and_si512(_mm512_srlv_epi16(qq, shift), three);
        }
    }
}

struct Q2K512 : KDecoder512<q2_k::bytes, true>, Q2KGroupMins {
    MOE_ALWAYS_INLINE static Block decode(const uint8_t *w, uint64_t &mins, uint32_t &dm) {
        Block k;
        group_pair_scales(q2_k_head(w, mins, dm), k.sc);
        two_bit_fields512(w + q2_k::qs, k.v);
        return k;
    }
    MOE_ALWAYS_INLINE static __m512i sums(const Block &k, const uint8_t *act, const uint8_t *) {
        return group_sums512(k.v, k.sc, act, _mm512_setzero_si512());
    }
};

// Q3_K stored +4, as Q3K.
struct Q3K512 : KDecoder512<q3_k::bytes, false> {
    using Block = CorrBlock;  // corr: -4 * S_g

    MOE_ALWAYS_INLINE static Block decode(const uint8_t *w, uint64_t &mins, uint32_t &dm) {
        const Q3KHead head = q3_k_head(w, mins, dm);
        Block k;
        group_pair_scales(head.scales, k.sc);
        k.corr = _mm512_zextsi256_si512(head.corr);
        two_bit_fields512(w + q3_k::qs, k.v);
        // hmask bit 4n + j of byte l: bit 2 of element l of the half holding j.
        const __m512i hh = _mm512_inserti64x4(_mm512_castsi256_si512(head.hmask), head.hmask, 1);
        const __m512i four = _mm512_set1_epi8(4);
        for (int r = 0; r < 4; ++r) {
            const int bit = 4 * (r / 2) + 2 * (r % 2);
            const __m512i test = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << bit)),
                                                    _mm256_set1_epi8(static_cast<char>(1 << (bit + 1))), 1);
            k.v[r] = _mm512_mask_add_epi8(k.v[r], _mm512_test_epi8_mask(hh, test), k.v[r], four);
        }
        return k;
    }
    MOE_ALWAYS_INLINE static __m512i sums(const Block &k, const uint8_t *act, const uint8_t *) {
        return corrected_group_sums512(k, act);
    }
};

struct IQ4XS512 : KDecoder512<iq4_xs::bytes, false> {
    struct Block {
        __m512i mag[4];     // |level|
        __mmask64 neg[4];   // levels below zero
        __m512i sc[4];      // int16: S_2r in the low half, S_2r+1 in the high half
    };

    MOE_ALWAYS_INLINE static Block decode(const uint8_t *w, uint64_t &mins, uint32_t &dm) {
        mins = 0;
        const __m512i s8 = _mm512_zextsi128_si512(iq4_xs_head(w, dm));
        const __m128i t = _mm_abs_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i *>(kIq4Levels)));
        const __m512i magnitudes = _mm512_broadcast_i32x4(t), eight = _mm512_set1_epi8(8);
        const __m512i low4 = _mm512_set1_epi8(0x0F);
        // 128-bit lane L of the low (high) nibbles of a 64-byte load: elements
        // 0..15 (16..31) of sub-block 4h + L; pairs of lanes make a register.
        __m512i lo[2], hi[2];
        for (int h = 0; h < 2; ++h) {
            const __m512i q = load512(w + iq4_xs::qs + 64 * h);
            lo[h] = _mm512_and_si512(q, low4);
            hi[h] = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
        }
        Block k;
        for (int r = 0; r < 4; ++r) {
            const int l = 2 * (r % 2);  // first 128-bit lane of the register's sub-blocks
            const __m512i lanes = _mm512_setr_epi64(2 * l, 2 * l + 1, 8 + 2 * l, 9 + 2 * l, 2 * l + 2, 2 * l + 3, 10 + 2 * l,
                                                   11 + 2 * l);
            const __m512i idx = _mm512_permutex2var_epi64(lo[r / 2], lanes, hi[r / 2]);
            k.mag[r] = _mm512_shuffle_epi8(magnitudes, idx);
            k.neg[r] = _mm512_cmplt_epu8_mask(idx, eight);  // levels 0..7 are the negative ones
            const __m512i pick = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<short>(2 * r)),
                                                    _mm256_set1_epi16(static_cast<short>(2 * r + 1)), 1);
            k.sc[r] = _mm512_permutexvar_epi16(pick, s8);
        }
        return k;
    }
    MOE_ALWAYS_INLINE static __m512i sums(const Block &k, const uint8_t *act, const uint8_t *) {
        const __m512i zero = _mm512_setzero_si512();
        __m512i acc = zero;
        for (int r = 0; r < 4; ++r) {
            const __m512i a = load512(act + q8_k::qs + 64 * r);
            const __m512i signed_a = _mm512_mask_sub_epi8(a, k.neg[r], zero, a);
            acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(k.mag[r], signed_a), k.sc[r]);
        }
        return acc;
    }
};

}  // namespace
}  // namespace moe::kernels::detail
