// 512-bit decoders of Q2_K, Q3_K and IQ4_XS super-blocks for the K-quant
// row loop (quant_rows.hpp KRows, unrolled in krows_unrolled.hpp), included
// by the AVX-512 kernel file. The quants take four 512-bit registers of 64
// elements from two 64-byte loads; each decoder's activations are copied
// once per call, in the order of its registers, into 64-byte aligned rows
// (kArranged), with the per-token values it starts its sums from. Block
// heads are unpacked in vector registers (Q2_K's mins are read by its group
// epilogue, group_terms8).
//
// Q2_K: scale times quant (0..45) looked up per byte, one vpdpbusd chain.
// Q3_K: quants stored +4, vpdpbusd sums of 4 packed into int16 and scaled
// with vpdpwssd (simd_avx512_blocks.hpp). IQ4_XS: levels + 128 in one
// vpdpbusd chain whose int32 lanes each belong to one sub-block, scaled with
// one vpmulld.
#pragma once

#include <immintrin.h>

#include <array>
#include <cstdint>
#include <cstring>

#include "kernels/simd_avx512_blocks.hpp"
#include "kernels/simd_lowbit_blocks.hpp"

namespace moe::kernels::detail {
namespace {

// Q2_K and Q3_K take their quants from one 64-byte load: register j = bits
// 2j..2j + 1 of every quant byte, so element 128n + 32j + l (byte 32n + l)
// and 128-bit lane L = group 8(L / 2) + 2j + L % 2. The activation quants
// are copied once per call in that order into 64-byte aligned rows (a Q8_K
// block's own quants would put every 64-byte load across two cache lines),
// followed by D's kArrangedBytes - 256 bytes of group sums.
template <size_t kBytes, typename Sums>
struct TwoBitLoadOrder {
    static constexpr bool kArranged = true;
    static constexpr size_t kArrangedBytes = kBytes;
    static void arrange(const uint8_t *qs, uint8_t *out) {
        for (int j = 0; j < 4; ++j)
            for (int n = 0; n < 2; ++n) std::memcpy(out + 64 * j + 32 * n, qs + 128 * n + 32 * j, 32);
        Sums::arrange_sums(load256(qs - q8_k::qs + q8_k::bsums), out + 256);
    }
    // The group of 128-bit lane L of register j.
    static constexpr int group(int j, int l) { return 8 * (l / 2) + 2 * j + l % 2; }
};

// Q2_K: quants 0..3 and 4-bit scales, so each product of quant and scale
// (0..45) fits a byte: per 128-bit lane a vpshufb table of v * s for the
// lane's four groups (entry 4j + v: register j's group), indexed by the
// quant with the register in bits 2..3, gives the scaled weights, and the
// four vpdpbusd of a block add into one accumulator (no packs, no scale
// multiplies; |lane| <= 16 * 45 * 127). The 4-bit mins meet the activation
// group sums in the row loop's group epilogue (group_terms8; Q2KGroupMins'
// group_min_sums8 for a row's last blocks).
struct Q2K512 : KDecoder512<q2_k::bytes, true>, Q2KGroupMins, TwoBitLoadOrder<256, Q2K512> {
    using TwoBitLoadOrder<256, Q2K512>::kArranged;
    static void arrange_sums(__m256i, uint8_t *) {}
    struct Block {
        __m512i v[4];  // scale * quant
    };
    // vpshufb control of the table: int16 lanes 2j and 2j + 1 of 128-bit lane
    // L take the scale of group(j, L) (zero-extended).
    static constexpr std::array<int8_t, 64> kTablePicks = [] {
        std::array<int8_t, 64> c{};
        for (int l = 0; l < 4; ++l)
            for (int j = 0; j < 4; ++j)
                for (int h = 0; h < 2; ++h) {
                    c[16 * l + 4 * j + 2 * h] = static_cast<int8_t>(group(j, l));
                    c[16 * l + 4 * j + 2 * h + 1] = -1;
                }
        return c;
    }();

    MOE_ALWAYS_INLINE static Block decode(const uint8_t *w, uint64_t &mins, uint32_t &dm) {
        mins = 0;
        dm = load_u32(w + q2_k::d);
        return decode<0>(w, Head{});
    }
    // The mins of a full group's eight blocks against their activation group
    // sums (a row's last blocks take Q2KGroupMins'), blocks j and 4 + j in the
    // 256-bit halves of one register: eight int16 products per block and a
    // 512-bit fold of four registers, instead of Q2KGroupMins' eight 256-bit
    // products and their vphaddd transpose. 128-bit lanes 0, 1: int32 k =
    // partial sums of block k; lanes 2, 3: of block 4 + k.
    MOE_ALWAYS_INLINE static __m512i min_quads8(const uint8_t *w, size_t w_stride, const uint8_t *act,
                                                size_t act_stride) {
        const auto load128 = [](const uint8_t *p) { return _mm_loadu_si128(reinterpret_cast<const __m128i *>(p)); };
        __m512i m[4];
        for (int j = 0; j < 4; ++j) {
            const uint8_t *sc = w + j * w_stride + q2_k::scales, *bs = act + j * act_stride + q8_k::bsums;
            const __m256i sc2 = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(sc)), load128(sc + 4 * w_stride), 1);
            // The 4-bit mins: each scale byte zero-extended to int16 and shifted right by 4.
            const __m512i mins = _mm512_srli_epi16(_mm512_cvtepu8_epi16(sc2), 4);
            m[j] = _mm512_madd_epi16(mins, _mm512_inserti64x4(_mm512_castsi256_si512(load256(bs)), load256(bs + 4 * act_stride), 1));
        }
        return Sum512::quad(Sum512::pair(m[0], m[1]), Sum512::pair(m[2], m[3]));
    }
    // The fp16 fields of 8 super-blocks `stride` bytes apart, gathered in a
    // vector (lane_words8) from the 16 bytes that end with them; the mins
    // are read by group_terms8.
    struct Head {
        __m256i dm;  // lane j: d | dmin << 16 of block j
    };
    MOE_ALWAYS_INLINE static Head head8(const uint8_t *w, size_t stride) {
        const uint8_t *f = w + q2_k::d + 4 - 16;
        return {lane_words8<3>(blocks4_128(f, stride), blocks4_128(f + 4 * stride, stride))};
    }
    // A full group's eight float terms (KRows::terms8's products in the same
    // order) from the fold of its blocks' sums and its mins: the last levels
    // of both folds share two 128-bit lane shuffles and one add, and the
    // totals (lanes 0..7) and mins sums (lanes 8..15) meet d and dmin (one
    // vpermw of the fields and one conversion) in one 512-bit register.
    MOE_ALWAYS_INLINE static __m256 group_terms8(const Fold512 &fold, const Head &h, const uint8_t *w,
                                                 size_t w_stride, const uint8_t *act, size_t act_stride, __m256 da) {
        const __m512i qm = min_quads8(w, w_stride, act, act_stride);
        const __m512i q0 = fold.quad[0], q1 = fold.quad[1];
        // 128-bit lanes: q0's 0 + 1, 2 + 3, q1's 0 + 1, 2 + 3 (as Sum512::total).
        const __m512i r = _mm512_add_epi32(_mm512_shuffle_i64x2(q0, q1, 0x88), _mm512_shuffle_i64x2(q0, q1, 0xDD));
        // Lanes 0..7: the totals of blocks 0..7; 8..15: their mins sums.
        const __m512i s = _mm512_add_epi32(_mm512_shuffle_i64x2(r, qm, 0x88), _mm512_shuffle_i64x2(r, qm, 0xDD));
        const __m256i d_then_dmin = _mm256_permutexvar_epi16(
            _mm256_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15), h.dm);
        const __m512 t = _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtph_ps(d_then_dmin), _mm512_broadcast_f32x8(da)),
                                       _mm512_cvtepi32_ps(s));
        return _mm256_sub_ps(_mm512_castps512_ps256(t), _mm512_extractf32x8_ps(t, 1));
    }
    // A block's weights (the head's fields and mins are read by the row loop).
    template <int J>
    MOE_ALWAYS_INLINE static Block decode(const uint8_t *w, const Head &) {
        const __m512i scales = _mm512_and_si512(
            _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i *>(w + q2_k::scales))),
            _mm512_set1_epi8(0x0F));
        // Entry 4j + v = v * s: words (0 | s << 8) and (2s | 3s << 8).
        const __m512i table = _mm512_mullo_epi16(_mm512_shuffle_epi8(scales, _mm512_loadu_si512(kTablePicks.data())),
                                                 _mm512_set1_epi32(0x03020100));
        const __m512i q = load512(w + q2_k::qs), three = _mm512_set1_epi8(3);
        Block k;
        for (int j = 0; j < 4; ++j) {
            // (q >> 2j & 3) | 4j  (ternary logic 0xEA: (A & B) | C).
            const __m512i idx = _mm512_ternarylogic_epi32(_mm512_srli_epi16(q, 2 * j), three,
                                                          _mm512_set1_epi8(static_cast<char>(4 * j)), 0xEA);
            k.v[j] = _mm512_shuffle_epi8(table, idx);
        }
        return k;
    }
    MOE_ALWAYS_INLINE static __m512i sums(const Block &k, const uint8_t *arranged, const uint8_t *) {
        __m512i acc = _mm512_dpbusd_epi32(_mm512_setzero_si512(), k.v[0], load512(arranged));
        for (int j = 1; j < 4; ++j) acc = _mm512_dpbusd_epi32(acc, k.v[j], load512(arranged + 64 * j));
        return acc;
    }
};

// Q3_K: the 16 signed group scales (-32..31) of a block as bytes, as
// q3_k_scale_bytes gives them but in vector registers (the scalar unpacking
// and its moves into a vector register took about a quarter of the kernel's
// time), for up to four blocks at once: 128-bit lane L of x holds the 16
// bytes that end where block L does (byte 2 + i: packed byte p_i).
MOE_ALWAYS_INLINE __m512i q3_k_scale_bytes4(__m512i x) {
    // Byte g, bits 0..3: the low (g < 8) or high (g >= 8) nibble of p_(g % 8).
    const __m512i lo = _mm512_srlv_epi64(
        _mm512_shuffle_epi8(x, _mm512_broadcast_i32x4(_mm_setr_epi8(2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5, 6, 7, 8, 9))),
        _mm512_broadcast_i32x4(_mm_set_epi64x(4, 0)));
    // Byte g, bits 4..5: bits 2(g / 4)..2(g / 4) + 1 of p_(8 + g % 4) (a left
    // rotation of each 32-bit lane by 4 - 2(g / 4)).
    const __m512i hi = _mm512_rolv_epi32(
        _mm512_shuffle_epi8(
            x, _mm512_broadcast_i32x4(_mm_setr_epi8(10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13))),
        _mm512_broadcast_i32x4(_mm_setr_epi32(4, 2, 0, 30)));
    // Bits 0..3 from lo, 4..7 from hi (ternary logic 0xE4: C ? A : B), then the 6-bit field.
    const __m512i u =
        _mm512_and_si512(_mm512_ternarylogic_epi32(lo, hi, _mm512_set1_epi8(0x0F), 0xE4), _mm512_set1_epi8(0x3F));
    return _mm512_sub_epi8(u, _mm512_set1_epi8(32));
}

// Q3_K stored +4 (0..7), as Q3K; the +4 is removed with the activation
// group sums, which the arranged activations hold times -4, so the scales
// themselves are the correction vector. The high bit comes from hmask by a
// rotation and a ternary-logic merge rather than a byte-mask test and a
// masked add (mask tests run on the two shuffle pipes, which the scales and
// packs already load).
struct Q3K512 : KDecoder512<q3_k::bytes, false>, TwoBitLoadOrder<320, Q3K512> {
    using TwoBitLoadOrder<320, Q3K512>::kArranged;
    struct Block : CorrBlock {  // corr: S_g, against -4 times the group sums
        bool odd = false;       // the scales in corr are int16 lanes 16..31 (Head's odd blocks)
    };
    // The group sums times -4, the offset of the stored quants (|4 * bsum| <=
    // 4 * 16 * 127), twice: the second copy meets the scales of the odd
    // blocks of a group, which Head keeps in the upper int16 lanes.
    static void arrange_sums(__m256i bsums, uint8_t *out) {
        const __m256i c = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(bsums, 2));
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(out), c);
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + 32), c);
    }
    // The quants of a block (scales left unset).
    MOE_ALWAYS_INLINE static Block quants(const uint8_t *w) {
        const __m512i q = load512(w + q3_k::qs), three = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4);
        // hmask bit 4n + j of byte l, moved to bit 2 of its byte by a rotation
        // of each 32-bit lane (left by 2 - j, 2 - 4 - j mod 32 in the high half).
        const __m512i hh = _mm512_broadcast_i64x4(load256(w + q3_k::hmask));
        Block k;
        for (int j = 0; j < 4; ++j) {
            const __m512i rot = _mm512_inserti64x4(_mm512_set1_epi32((34 - j) % 32), _mm256_set1_epi32(30 - j), 1);
            const __m512i low2 = _mm512_and_si512(_mm512_srli_epi16(q, 2 * j), three);
            // low2 | (h & 4)  (ternary logic 0xF8: A | (B & C)).
            k.v[j] = _mm512_ternarylogic_epi32(low2, _mm512_rolv_epi32(hh, rot), four, 0xF8);
        }
        return k;
    }
    MOE_ALWAYS_INLINE static Block decode(const uint8_t *w, uint64_t &mins, uint32_t &dm) {
        mins = 0;
        dm = load_u32(w + q3_k::d - 2);
        Block k = quants(w);
        const __m512i x = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i *>(w + q3_k::scales - 2)));
        k.corr = _mm512_cvtepi8_epi16(_mm512_castsi512_si256(q3_k_scale_bytes4(x)));
        group_pair_scales<Q3K512>(k.corr, k.sc);
        return k;
    }

    // The heads of 8 super-blocks `stride` bytes apart, decoded together
    // (q3_k_scale_bytes4 on four blocks per register).
    struct Head {
        __m256i dm;     // lane j: d << 16 of block j (the low half is not read)
        __m512i sc[4];  // int16 lane 16 (j % 2) + g of sc[j / 2]: S_g of block j
    };
    MOE_ALWAYS_INLINE static Head head8(const uint8_t *w, size_t stride) {
        const __m512i x0 = blocks4_128(w + q3_k::scales - 2, stride);
        const __m512i x1 = blocks4_128(w + q3_k::scales - 2 + 4 * stride, stride);
        const __m512i b0 = q3_k_scale_bytes4(x0), b1 = q3_k_scale_bytes4(x1);
        Head h;
        h.dm = lane_words8<3>(x0, x1);  // d: the last two bytes of each lane
        h.sc[0] = _mm512_cvtepi8_epi16(_mm512_castsi512_si256(b0));
        h.sc[1] = _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(b0, 1));
        h.sc[2] = _mm512_cvtepi8_epi16(_mm512_castsi512_si256(b1));
        h.sc[3] = _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(b1, 1));
        return h;
    }
    // Block J of the group whose head is h: its scales are int16 lanes
    // 16 (J % 2) .. 16 (J % 2) + 15 of h.sc[J / 2], which meet the second
    // copy of the group sums for odd J.
    template <int J>
    MOE_ALWAYS_INLINE static Block decode(const uint8_t *w, const Head &h) {
        Block k = quants(w);
        k.corr = h.sc[J / 2];
        group_pair_scales<Q3K512, 16 * (J % 2)>(k.corr, k.sc);
        k.odd = J % 2 == 1;
        return k;
    }
    MOE_ALWAYS_INLINE static __m512i sums(const Block &k, const uint8_t *arranged, const uint8_t *) {
        const __m512i bsums = _mm512_maskz_loadu_epi16(k.odd ? 0xFFFF0000u : 0x0000FFFFu, arranged + 256);
        return group_sums512(k.v, k.sc, arranged, _mm512_dpwssd_epi32(_mm512_setzero_si512(), bsums, k.corr));
    }
};

// IQ4_XS: the levels + 128 (1..241, unsigned; a vpshufb table) meet the
// activations in vpdpbusd. The two 64-byte loads of quants (128-bit lane L:
// sub-blocks L and 4 + L) are interleaved by 64-bit unpacks, so 128-bit
// lane L of every register holds 8 elements of sub-block L and then 8 of
// sub-block 4 + L, and a block's four vpdpbusd add into one accumulator
// whose int32 lanes each belong to one sub-block. It starts from -128 times
// the sum of the activations its lane meets (computed once per call), so
// its lanes are exact sums of level times activation (|lane| <= 16 * 127 *
// 127), and one vpmulld by the sub-block scales turns them into the
// block's terms.
struct IQ4XS512 : KDecoder512<iq4_xs::bytes, false> {
    static constexpr bool kArranged = true;
    // Register r, 128-bit lane L: the activations of elements e_r .. e_r + 7
    // of sub-block L, then of sub-block 4 + L (e_r: 0, 16, 8, 24 for the low
    // and high nibbles of the low and high unpacks), then the accumulator's
    // starting values.
    static constexpr size_t kArrangedBytes = 320;
    static constexpr int kElemOffset[4] = {0, 16, 8, 24};
    static void arrange(const uint8_t *qs, uint8_t *out) {
        for (int r = 0; r < 4; ++r)
            for (int l = 0; l < 4; ++l)
                for (int k = 0; k < 2; ++k)
                    std::memcpy(out + 64 * r + 16 * l + 8 * k, qs + 32 * (l + 4 * k) + kElemOffset[r], 8);
        const __m512i ones = _mm512_set1_epi8(1);
        __m512i sum = _mm512_setzero_si512();
        for (int r = 0; r < 4; ++r) sum = _mm512_dpbusd_epi32(sum, ones, load512(out + 64 * r));
        _mm512_storeu_si512(out + 256, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sum, 7)));
    }
    struct Block {
        __m512i v[4];  // levels + 128, in the order of the arranged registers
        __m512i sc;    // int32: S_(L + 4 (k / 2)) in int32 lane k of 128-bit lane L
    };

    // The sub-block scales S_s (-32..31) in the int32 lanes of sc: the low
    // nibble from scales_l, the two high bits from scales_h.
    MOE_ALWAYS_INLINE static __m512i scales(const uint8_t *w) {
        const __m512i sub = _mm512_setr_epi32(0, 0, 4, 4, 1, 1, 5, 5, 2, 2, 6, 6, 3, 3, 7, 7);
        const __m512i lo = _mm512_srlv_epi32(_mm512_set1_epi32(static_cast<int>(load_u32(w + iq4_xs::scales_l))),
                                             _mm512_slli_epi32(sub, 2));
        // scales_h starts at bit 0 of the 32 bits from byte 2: bits 2s..2s + 1 to 4..5.
        const __m512i hi = _mm512_rolv_epi32(_mm512_set1_epi32(static_cast<int>(load_u32(w + iq4_xs::scales_h))),
                                             _mm512_sub_epi32(_mm512_set1_epi32(4), _mm512_slli_epi32(sub, 1)));
        // Bits 0..3 from lo, the rest from hi (ternary logic 0xE4: C ? A : B), then the 6-bit field - 32.
        const __m512i u =
            _mm512_and_si512(_mm512_ternarylogic_epi32(lo, hi, _mm512_set1_epi32(0x0F), 0xE4), _mm512_set1_epi32(0x3F));
        return _mm512_sub_epi32(u, _mm512_set1_epi32(32));
    }

    MOE_ALWAYS_INLINE static Block decode(const uint8_t *w, uint64_t &mins, uint32_t &dm) {
        mins = 0;
        dm = static_cast<uint32_t>(load_u16(w + iq4_xs::d)) << 16;
        return decode<0>(w, Head{});
    }

    // The fp16 fields of 8 super-blocks `stride` bytes apart, gathered in a
    // vector (lane_words8).
    struct Head {
        __m256i dm;  // lane j: d << 16 of block j
    };
    MOE_ALWAYS_INLINE static Head head8(const uint8_t *w, size_t stride) {
        const __m512i x0 = blocks4_128(w, stride), x1 = blocks4_128(w + 4 * stride, stride);
        return {_mm256_slli_epi32(lane_words8<0>(x0, x1), 16)};
    }
    template <int J>
    MOE_ALWAYS_INLINE static Block decode(const uint8_t *w, const Head &) {
        const __m128i t = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i *>(kIq4Levels)),
                                        _mm_set1_epi8(static_cast<char>(0x80)));
        const __m512i table = _mm512_broadcast_i32x4(t), low4 = _mm512_set1_epi8(0x0F);
        const __m512i q0 = load512_once(w + iq4_xs::qs), q1 = load512_once(w + iq4_xs::qs + 64);
        const __m512i u[2] = {_mm512_unpacklo_epi64(q0, q1), _mm512_unpackhi_epi64(q0, q1)};
        Block k;
        for (int h = 0; h < 2; ++h) {
            k.v[2 * h] = _mm512_shuffle_epi8(table, _mm512_and_si512(u[h], low4));
            k.v[2 * h + 1] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(u[h], 4), low4));
        }
        k.sc = scales(w);
        return k;
    }
    MOE_ALWAYS_INLINE static __m512i sums(const Block &k, const uint8_t *arranged, const uint8_t *) {
        __m512i acc = load512(arranged + 256);
        for (int r = 0; r < 4; ++r) acc = _mm512_dpbusd_epi32(acc, k.v[r], load512(arranged + 64 * r));
        return _mm512_mullo_epi32(acc, k.sc);
    }
};

}  // namespace
}  // namespace moe::kernels::detail
