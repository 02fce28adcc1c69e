// Low-bit weight types for the shared row loops (quant_rows.hpp): the block
// heads of Q2_K, Q3_K and IQ4_XS (scales, mins, fp16 fields; Q2_K's mins
// also for the 512-bit decoders of simd_avx512_lowbit.hpp), their 256-bit
// decoders (KRows' D, the AVX2 kernels) and IQ4_NL blocks (LegacyRows' NibblePairs B on AVX2,
// Nibbles8 on AVX-512); also the frame and the scaled group sums of these
// 256-bit K-quant decoders (KDecoder256, group_sums256).
//
// 256-bit K-quant registers hold 32 consecutive elements: two 16-element
// groups (the low and high 128-bit lane) for Q2_K / Q3_K, one 32-element
// sub-block for IQ4_XS. Products of weight and activation bytes are paired
// into int16 by vpmaddubsw, multiplied by the int16 scales and summed into
// int32 by vpmaddwd: exact integer sums, so every ISA gets the same block
// terms. Ranges per int16 pair: Q2_K 2 * 3 * 127, Q3_K 2 * 7 * 127 (stored
// +4), IQ4_XS 2 * 127 * 127 (magnitudes, the sign moved to the activations).
#pragma once

#include <immintrin.h>

#include <array>
#include <cstdint>
#include <cstring>

#include "kernels/quant_rows.hpp"

namespace moe::kernels::detail {
namespace {

inline uint64_t load_u64(const uint8_t *p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

// acc + the int16 pairs p16 times the int16 scales sc, summed pairwise into int32.
MOE_ALWAYS_INLINE __m256i scaled_add(__m256i acc, __m256i p16, __m256i sc) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, sc));
}

// The frame of a 256-bit K-quant decoder (KRows' D): eight registers of
// quants with their int16 scales, partial sums reduced by transpose_sum8.
template <size_t kBlockBytes, bool kHasMins>
struct KDecoder256 {
    static constexpr size_t kBytes = kBlockBytes;
    static constexpr bool kMins = kHasMins, kArranged = false;
    using Partial = __m256i;
    MOE_ALWAYS_INLINE static __m256i total8(const __m256i *x) { return transpose_sum8(x); }
    struct Block {
        __m256i v[8];
        __m256i sc[8];
    };
    // With an int16 correction per group against the activation sums.
    struct CorrBlock : Block {
        __m256i corr;
    };
};

// sum_i sc_i * <v_i, qa_i> over the eight registers of quants (+ the
// correction vector acc): vpmaddubsw pairs the unsigned weights with the
// activation bytes, vpmaddwd multiplies the pairs by register i's int16 scales.
MOE_ALWAYS_INLINE __m256i group_sums256(const __m256i *v, const __m256i *sc, const uint8_t *act, __m256i acc) {
    for (int i = 0; i < 8; ++i) acc = scaled_add(acc, _mm256_maddubs_epi16(v[i], load256(act + q8_k::qs + 32 * i)), sc[i]);
    return acc;
}

// The same with the block's offset correction (Q3_K, Q6_K: corr holds the
// offset times each group's scale) applied to the activation's 16 group sums.
template <typename Block>
MOE_ALWAYS_INLINE __m256i corrected_group_sums256(const Block &k, const uint8_t *act) {
    return group_sums256(k.v, k.sc, act, _mm256_madd_epi16(load256(act + q8_k::bsums), k.corr));
}

// pair_scales' vpshufb controls, read from memory (an operand of the
// shuffle) rather than built in registers for each block.
constexpr std::array<int8_t, 128> pair_scale_picks() {
    std::array<int8_t, 128> c{};
    for (int i = 0; i < 4; ++i)
        for (int half = 0; half < 2; ++half)
            for (int p = 0; p < 8; ++p) {
                const int g = 2 * i + half;  // the int16 scale of group g (mod 8) of the duplicated half
                c[32 * i + 16 * half + 2 * p] = static_cast<int8_t>(2 * g);
                c[32 * i + 16 * half + 2 * p + 1] = static_cast<int8_t>(2 * g + 1);
            }
    return c;
}

// Sixteen int16 group scales -> per register i (elements 32i..32i+31): the
// scale of group 2i in every int16 of the low 128-bit lane, of 2i + 1 in the high one.
// (kRegs = 4: the first four registers, from eight scales in the low half.)
template <int kRegs = 8>
MOE_ALWAYS_INLINE void pair_scales(__m256i sc16, __m256i *out) {
    static constexpr std::array<int8_t, 128> kPicks = pair_scale_picks();
    const __m256i dup[2] = {_mm256_permute2x128_si256(sc16, sc16, 0x00), _mm256_permute2x128_si256(sc16, sc16, 0x11)};
    for (int i = 0; i < kRegs; ++i) out[i] = _mm256_shuffle_epi8(dup[i / 4], load256(kPicks.data() + 32 * (i % 4)));
}

// The 2-bit fields of 64 quant bytes: register 4n + j = bits 2j..2j+1 of bytes 32n..32n+31.
MOE_ALWAYS_INLINE void two_bit_fields(const uint8_t *qs, __m256i *v) {
    const __m256i three = _mm256_set1_epi8(3);
    for (int n = 0; n < 2; ++n) {
        const __m256i q = load256(qs + 32 * n);
        for (int j = 0; j < 4; ++j) v[4 * n + j] = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), three);
    }
}

// --- block heads (Q2_K's mins shared with the 512-bit decoder) -------------------

// Q2_K: the fp16 fields and the 16 group scales as int16 (the mins are
// read by group_min_sums8).
MOE_ALWAYS_INLINE __m256i q2_k_head(const uint8_t *w, uint64_t &mins, uint32_t &dm) {
    mins = 0;
    dm = load_u32(w + q2_k::d);
    const __m128i sc = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i *>(w + q2_k::scales)),
                                     _mm_set1_epi8(0x0F));
    return _mm256_cvtepu8_epi16(sc);
}

// Q2_K's mins per 16-element group, for the row loops (kGroupMins): lane
// j < cnt = sum_g m_g * bsum_g of the weight block at w + j * w_stride
// (its mins: the high nibbles of the scale bytes, read again while the
// block is in L1) against the activation block at act + j * act_stride;
// lanes from cnt on are 0.
struct Q2KGroupMins {
    static constexpr bool kGroupMins = true;
    MOE_ALWAYS_INLINE static __m256i group_min_sums8(const uint8_t *w, size_t w_stride, const uint8_t *act,
                                                     size_t act_stride, int cnt) {
        __m256i s[8];
        for (int j = 0; j < 8; ++j) {
            if (j >= cnt) {
                s[j] = _mm256_setzero_si256();
                continue;
            }
            const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i *>(w + j * w_stride + q2_k::scales));
            const __m128i m8 = _mm_and_si128(_mm_srli_epi16(sc, 4), _mm_set1_epi8(0x0F));
            s[j] = _mm256_madd_epi16(_mm256_cvtepu8_epi16(m8), load256(act + j * act_stride + q8_k::bsums));
        }
        return transpose_sum8(s);
    }
};

// Q3_K: the 16 signed scales (-32..31) as bytes, from the 12 packed bytes.
MOE_ALWAYS_INLINE __m128i q3_k_scale_bytes(const uint8_t *p) {
    const uint64_t lo = load_u64(p);
    const uint32_t aux = load_u32(p + 8);
    const uint64_t two = 0x03030303u;
    // Byte i of the high-bit words: bits 2(i/4)..2(i/4)+1 of aux byte i % 4.
    const uint64_t hi0 = (aux & two) | ((aux >> 2) & two) << 32;
    const uint64_t hi1 = ((aux >> 4) & two) | ((aux >> 6) & two) << 32;
    const uint64_t nib = 0x0F0F0F0F0F0F0F0Full;
    const __m128i v = _mm_set_epi64x(static_cast<long long>(((lo >> 4) & nib) | hi1 << 4),
                                     static_cast<long long>((lo & nib) | hi0 << 4));
    return _mm_sub_epi8(v, _mm_set1_epi8(32));
}

// Q3_K: the fp16 field (as d << 16), the 16 signed group scales S_g as
// int16, the correction of the +4 the decoders store the quants with (-4 *
// S_g, int16) and the 32 hmask bytes (bit 4n + j of byte l: the high bit of
// element 128n + 32j + l).
struct Q3KHead {
    __m256i scales, corr, hmask;
};
MOE_ALWAYS_INLINE Q3KHead q3_k_head(const uint8_t *w, uint64_t &mins, uint32_t &dm) {
    mins = 0;
    dm = load_u32(w + q3_k::d - 2);
    const __m256i sc16 = _mm256_cvtepi8_epi16(q3_k_scale_bytes(w + q3_k::scales));
    return {sc16, _mm256_mullo_epi16(sc16, _mm256_set1_epi16(-4)), load256(w + q3_k::hmask)};
}

// IQ4_XS: the fp16 field (as d << 16) and the eight signed sub-block scales as int16.
MOE_ALWAYS_INLINE __m128i iq4_xs_head(const uint8_t *w, uint32_t &dm) {
    dm = static_cast<uint32_t>(load_u16(w + iq4_xs::d)) << 16;
    // Byte s: low nibble from scales_l, two high bits from scales_h.
    const uint64_t ls = _pdep_u64(load_u32(w + iq4_xs::scales_l), 0x0F0F0F0F0F0F0F0Full) |
                        _pdep_u64(load_u16(w + iq4_xs::scales_h), 0x0303030303030303ull) << 4;
    return _mm_cvtepi8_epi16(_mm_sub_epi8(_mm_cvtsi64_si128(static_cast<long long>(ls)), _mm_set1_epi8(32)));
}

// --- 256-bit decoders -----------------------------------------------------------------

// Q2_K: quants 0..3 with the 4-bit group scales; the 16 4-bit mins meet the
// activation sums per group in group_min_sums8.
struct Q2K : KDecoder256<q2_k::bytes, true>, Q2KGroupMins {

    MOE_ALWAYS_INLINE static Block decode(const uint8_t *w, uint64_t &mins, uint32_t &dm) {
        Block k;
        pair_scales(q2_k_head(w, mins, dm), k.sc);
        two_bit_fields(w + q2_k::qs, k.v);
        return k;
    }

    MOE_ALWAYS_INLINE static __m256i sums(const Block &k, const uint8_t *act, const uint8_t *) {
        return group_sums256(k.v, k.sc, act, _mm256_setzero_si256());
    }
};

// Q3_K: quants stored +4 (0..7: the two low bits and the hmask bit as bit 2);
// the +4 is removed with the activation group sums (-4 * S_g * bsum_g).
struct Q3K : KDecoder256<q3_k::bytes, false> {
    using Block = CorrBlock;  // corr: int16 -4 * S_g

    MOE_ALWAYS_INLINE static Block decode(const uint8_t *w, uint64_t &mins, uint32_t &dm) {
        const Q3KHead head = q3_k_head(w, mins, dm);
        Block k;
        pair_scales(head.scales, k.sc);
        k.corr = head.corr;
        two_bit_fields(w + q3_k::qs, k.v);
        const __m256i hm = head.hmask, four = _mm256_set1_epi8(4);
        for (int i = 0; i < 8; ++i) {
            // hmask bit i of byte l -> bit 2 of element l of register i.
            const __m256i h = i <= 2 ? _mm256_slli_epi16(hm, 2 - i) : _mm256_srli_epi16(hm, i - 2);
            k.v[i] = _mm256_or_si256(k.v[i], _mm256_and_si256(h, four));
        }
        return k;
    }

    MOE_ALWAYS_INLINE static __m256i sums(const Block &k, const uint8_t *act, const uint8_t *) {
        return corrected_group_sums256(k, act);
    }
};

// The IQ4 levels as signed bytes in both 128-bit lanes (a vpshufb table).
MOE_ALWAYS_INLINE __m256i iq4_table() {
    const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i *>(kIq4Levels));
    return _mm256_setr_m128i(t, t);
}

// IQ4_XS: register 2p holds the low nibbles of quant bytes 32p..32p+31
// (elements 0..15 of sub-blocks 2p and 2p + 1, one per 128-bit lane) and
// register 2p + 1 their high nibbles (elements 16..31), as signed levels.
// The activations are arranged once per call in the same order, so nothing
// crosses lanes and both registers of a pair take the scales of sub-blocks
// 2p (low lane) and 2p + 1 (high lane). A level's magnitude meets the
// activation with the level's sign (vpsignb), as vpmaddubsw needs one
// unsigned operand (levels are never 0).
struct IQ4XS : KDecoder256<iq4_xs::bytes, false> {
    static constexpr bool kArranged = true;
    struct Block {
        __m256i v[8];
        __m256i sc[4];
    };

    // Per 64 quants: elements 0..15 of both sub-blocks, then 16..31 of both.
    static void arrange(const uint8_t *qs, uint8_t *out) {
        for (int p = 0; p < 4; ++p)
            for (int half = 0; half < 2; ++half)
                for (int sub = 0; sub < 2; ++sub)
                    std::memcpy(out + 64 * p + 32 * half + 16 * sub, qs + 64 * p + 32 * sub + 16 * half, 16);
    }

    MOE_ALWAYS_INLINE static Block decode(const uint8_t *w, uint64_t &mins, uint32_t &dm) {
        mins = 0;
        Block k;
        pair_scales<4>(_mm256_zextsi128_si256(iq4_xs_head(w, dm)), k.sc);
        const __m256i table = iq4_table(), low4 = _mm256_set1_epi8(0x0F);
        for (int p = 0; p < 4; ++p) {
            const __m256i q = load256(w + iq4_xs::qs + 32 * p);
            k.v[2 * p] = _mm256_shuffle_epi8(table, _mm256_and_si256(q, low4));
            k.v[2 * p + 1] = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(q, 4), low4));
        }
        return k;
    }

    // The magnitudes are taken here, per token, rather than kept from decode
    // (as the 512-bit decoder once did): eight more registers per block measured
    // 11-13% slower for one token and no faster for four.
    MOE_ALWAYS_INLINE static __m256i sums(const Block &k, const uint8_t *arranged, const uint8_t *) {
        __m256i sum = _mm256_setzero_si256();
        for (int r = 0; r < 8; ++r) {
            const __m256i a = load256(arranged + 32 * r);
            sum = scaled_add(sum, _mm256_maddubs_epi16(_mm256_abs_epi8(k.v[r]), _mm256_sign_epi8(a, k.v[r])), k.sc[r / 2]);
        }
        return sum;
    }
};

// IQ4_NL as a legacy nibble block (the Q4_0 layout): the levels + 128
// (1..241, unsigned) as a vpshufb table, the offset removed with the
// activation block sums.
struct IQ4NLDec {
    static constexpr size_t kBytes = iq4_nl::bytes, kD = iq4_nl::d, kQs = iq4_nl::qs, kQh = 0;
    static constexpr bool kMin = false, kFive = false;
    static constexpr int32_t kOffset = 128;
    MOE_ALWAYS_INLINE static __m128i levels() {
        return _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i *>(kIq4Levels)),
                             _mm_set1_epi8(static_cast<char>(0x80)));
    }
    MOE_ALWAYS_INLINE static __m256i uints(const uint8_t *b) {
        const __m128i t = levels();
        return _mm256_shuffle_epi8(_mm256_setr_m128i(t, t), nibbles32(b + iq4_nl::qs));
    }
};
// IQ4_NL kept signed (for the vpsignb dot).
struct IQ4NLSignedDec {
    static constexpr size_t kBytes = iq4_nl::bytes, kD = iq4_nl::d, kQs = iq4_nl::qs, kQh = 0;
    static constexpr bool kMin = false, kFive = false;
    static constexpr int32_t kOffset = 0;
    MOE_ALWAYS_INLINE static __m128i levels() { return _mm_loadu_si128(reinterpret_cast<const __m128i *>(kIq4Levels)); }
    MOE_ALWAYS_INLINE static __m256i uints(const uint8_t *b) { return _mm256_shuffle_epi8(iq4_table(), nibbles32(b + iq4_nl::qs)); }
};

}  // namespace
}  // namespace moe::kernels::detail
