// Low-bit weight types for the shared row loops (quant_rows.hpp): the block
// heads of Q2_K, Q3_K and IQ4_XS (scales, mins, fp16 fields; Q2_K's mins
// also for the 512-bit decoders of simd_avx512_lowbit.hpp), their 256-bit
// decoders (the AVX2 kernels: Q2_K and Q3_K in parts for KRowsUnrolled,
// IQ4_XS for KRows) and IQ4_NL blocks (LegacyRows' NibblePairs B on AVX2,
// Nibbles8 on AVX-512).
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

// pair_scales' vpshufb controls, read from memory (an operand of the
// shuffle) rather than built in registers for each block.
constexpr std::array<int8_t, 128> pair_scale_picks() {
    std::array<int8_t, 128> c{};
    for (int i = 0; i < 4; ++i)
        for (int half = 0; half < 2; ++half)
            for (int p = 0; p < 8; ++p) {
                const int g = 2 * i + half;  // the int16 scale g, in either 128-bit lane
                c[32 * i + 16 * half + 2 * p] = static_cast<int8_t>(2 * g);
                c[32 * i + 16 * half + 2 * p + 1] = static_cast<int8_t>(2 * g + 1);
            }
    return c;
}

// Eight int16 scales in both 128-bit lanes of sc -> out[i], i = 0..3:
// scale 2i in every int16 of the low 128-bit lane, 2i + 1 in the high one.
MOE_ALWAYS_INLINE void pair_scales(__m256i sc, __m256i *out) {
    static constexpr std::array<int8_t, 128> kPicks = pair_scale_picks();
    for (int i = 0; i < 4; ++i) out[i] = _mm256_shuffle_epi8(sc, load256(kPicks.data() + 32 * i));
}

// --- block heads (Q2_K's mins shared with the 512-bit decoder) -------------------

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

// Q3_K: the 16 signed scales (-32..31) as bytes, from the 12 packed bytes
// (scalar code, which runs beside the vector work).
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

// IQ4_XS: the fp16 field (as d << 16) and the eight signed sub-block
// scales as int16 in both 128-bit lanes. The scale bytes are made signed
// in scalar code (which runs beside the vector work): u - 32 of a 6-bit u
// is u with bit 5 flipped, read as a 6-bit signed field, so bit 5 is
// copied to bits 6 and 7.
MOE_ALWAYS_INLINE __m256i iq4_xs_head(const uint8_t *w, uint32_t &dm) {
    dm = static_cast<uint32_t>(load_u16(w + iq4_xs::d)) << 16;
    // Byte s: low nibble from scales_l, two high bits from scales_h.
    const uint64_t u = _pdep_u64(load_u32(w + iq4_xs::scales_l), 0x0F0F0F0F0F0F0F0Full) |
                       _pdep_u64(load_u16(w + iq4_xs::scales_h), 0x3030303030303030ull);
    const uint64_t bit5 = 0x2020202020202020ull, t = u ^ bit5, sign = t & bit5;
    const __m128i bytes = _mm_cvtsi64_si128(static_cast<long long>(t | sign << 1 | sign << 2));
    return _mm256_cvtepi8_epi16(_mm_unpacklo_epi64(bytes, bytes));
}

// --- 256-bit decoders -----------------------------------------------------------------

// The parts of the Q2_K and Q3_K decoders for the unrolled loop
// (krows_unrolled.hpp, KRowsUnrolled's D in parts): two parts of 128
// elements (n = 0, 1: quant bytes 32n..32n+31), each dotted against every
// token before the next is decoded. Register j of part n = bits 2j..2j+1 of
// those bytes (D adds Q3_K's high bit), its 128-bit lane L = group 8n + 2j +
// L. The int16 pair products of a part's four registers are summed by two
// levels of vphaddw into halves of groups before one vpmaddwd by the group
// scales, instead of one vpmaddwd by a broadcast scale per register (|half|
// <= 8 * 7 * 127 with Q3_K's quants stored +4).
template <size_t kBlockBytes, bool kHasMins>
struct TwoBitParts : KDecoder256<kBlockBytes, kHasMins, false> {
    static constexpr int kParts = 2;
    struct Part {
        __m256i v[4];
        __m256i sc;  // int16 2i, 2i + 1 of 128-bit lane L: the scale of register i's group
    };

    // The 2-bit fields of part n's quant bytes.
    MOE_ALWAYS_INLINE static void fields(const uint8_t *qs, int n, __m256i *v) {
        const __m256i q = load256(qs + 32 * n), three = _mm256_set1_epi8(3);
        for (int j = 0; j < 4; ++j) v[j] = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), three);
    }

    // Part n's scales from the 16 group scales as signed bytes in both 128-bit
    // lanes: a vpshufb puts S_(8n + 2(i / 2) + L) in the high byte of int16 i
    // of lane L (the low byte zero), a 16-bit arithmetic shift by 8 extends it.
    MOE_ALWAYS_INLINE static __m256i scales(__m256i bytes, int n) {
        static constexpr std::array<int8_t, 64> kPicks = [] {
            std::array<int8_t, 64> c{};
            for (int m = 0; m < 2; ++m)
                for (int b = 0; b < 32; ++b)
                    c[32 * m + b] = static_cast<int8_t>(b % 2 ? 8 * m + 2 * ((b % 16) / 4) + b / 16 : -1);
            return c;
        }();
        return _mm256_srai_epi16(_mm256_shuffle_epi8(bytes, load256(kPicks.data() + 32 * n)), 8);
    }

    MOE_ALWAYS_INLINE static __m256i part_sums(const Part &x, const uint8_t *act, int n, __m256i acc) {
        __m256i p[4];
        for (int j = 0; j < 4; ++j) p[j] = _mm256_maddubs_epi16(x.v[j], load256(act + q8_k::qs + 128 * n + 32 * j));
        // int16 2i, 2i + 1 of each lane: register i's sums over elements 0..7 and 8..15 of its group.
        const __m256i halves = _mm256_hadd_epi16(_mm256_hadd_epi16(p[0], p[1]), _mm256_hadd_epi16(p[2], p[3]));
        return _mm256_add_epi32(acc, _mm256_madd_epi16(halves, x.sc));
    }
};

// Q2_K: quants 0..3 with the 4-bit group scales; the 16 4-bit mins meet the
// activation sums per group in group_min_sums8.
struct Q2K : TwoBitParts<q2_k::bytes, true>, Q2KGroupMins {
    using Context = __m256i;  // the 16 group scales as bytes in both 128-bit lanes
    MOE_ALWAYS_INLINE static Context context(const uint8_t *w, uint64_t &mins, uint32_t &dm) {
        mins = 0;
        dm = load_u32(w + q2_k::d);
        return _mm256_and_si256(_mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(w + q2_k::scales))),
                                _mm256_set1_epi8(0x0F));
    }
    MOE_ALWAYS_INLINE static __m256i start(Context, const uint8_t *) { return _mm256_setzero_si256(); }
    MOE_ALWAYS_INLINE static Part part(const uint8_t *w, Context c, int n) {
        Part x;
        fields(w + q2_k::qs, n, x.v);
        x.sc = scales(c, n);
        return x;
    }
};

// Q3_K: the quants stored +4 (0..7: the two low bits and hmask bit 4n + j
// as bit 2); the +4 is removed with the activation group sums (-4 * S_g *
// bsum_g).
struct Q3K : TwoBitParts<q3_k::bytes, false> {
    struct Context {
        __m256i scales;  // the 16 signed group scales S_g as bytes, in both 128-bit lanes
        __m256i corr;    // int16 -4 * S_g
        __m256i hmask;
    };
    MOE_ALWAYS_INLINE static Context context(const uint8_t *w, uint64_t &mins, uint32_t &dm) {
        mins = 0;
        dm = load_u32(w + q3_k::d - 2);
        const __m128i sb = q3_k_scale_bytes(w + q3_k::scales);
        return {_mm256_broadcastsi128_si256(sb), _mm256_mullo_epi16(_mm256_cvtepi8_epi16(sb), _mm256_set1_epi16(-4)),
                load256(w + q3_k::hmask)};
    }
    MOE_ALWAYS_INLINE static __m256i start(const Context &c, const uint8_t *act) {
        return _mm256_madd_epi16(load256(act + q8_k::bsums), c.corr);
    }
    MOE_ALWAYS_INLINE static Part part(const uint8_t *w, const Context &c, int n) {
        Part x;
        fields(w + q3_k::qs, n, x.v);
        // hmask bit 4n + j of byte l -> bit 2.
        const __m256i h = n ? _mm256_srli_epi16(c.hmask, 4) : c.hmask, four = _mm256_set1_epi8(4);
        const __m256i hj[4] = {_mm256_slli_epi16(h, 2), _mm256_slli_epi16(h, 1), h, _mm256_srli_epi16(h, 1)};
        for (int j = 0; j < 4; ++j) x.v[j] = _mm256_or_si256(x.v[j], _mm256_and_si256(hj[j], four));
        x.sc = scales(c.scales, n);
        return x;
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
struct IQ4XS : KDecoder256<iq4_xs::bytes, false, true> {
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
        pair_scales(iq4_xs_head(w, dm), k.sc);
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
