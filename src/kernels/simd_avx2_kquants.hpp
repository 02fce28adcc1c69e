// AVX2 decoders of Q4_K, Q5_K and Q6_K for the unrolled K-quant row loop
// (krows_unrolled.hpp), included by the AVX2 kernel file only.
//
// Without vpdpbusd, vpmaddubsw leaves int16 sums of two products, and
// vpmaddwd multiplies them by the int16 scales and widens them. Both
// decoders place the quants so that the registers of a pair hold the same
// sub-blocks (groups) in the same places, their 128-bit lanes (Q4_K, Q5_K)
// or 64-bit words (Q6_K): the int16 sums of a pair are added before its one
// vpmaddwd by the scales, instead of one vpmaddwd per register of 32 quants.
// Each token's activations are arranged once per call in the same order.
// A block comes in two parts of two pairs, each dotted against every token
// before the next is decoded. The sums are exact integers, so every ISA
// gets the same block terms.
#pragma once

#include <immintrin.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/quant_rows.hpp"

namespace moe::kernels::detail {
namespace {

// Two 16-byte pieces, at p (low 128-bit lane) and p + d (high lane).
MOE_ALWAYS_INLINE __m256i lane_pieces(const uint8_t *p, size_t d) {
    return _mm256_loadu2_m128i(reinterpret_cast<const __m128i *>(p + d), reinterpret_cast<const __m128i *>(p));
}

// The parts of both decoders (the loop's decoder in parts): a part is two
// pairs of registers, v[2n] and v[2n + 1] with the int16 scales sc[n] of
// their lanes / words, against 128 bytes of arranged activations.
template <size_t kBlockBytes, bool kHasMins>
struct PairedParts : KDecoder256<kBlockBytes, kHasMins, true> {
    static constexpr int kParts = 2;
    struct Part {
        __m256i v[4], sc[2];
    };
    // acc + the sums of part i against the arranged activations a (64 bytes
    // per pair). The empty asm adds each pair's products to acc where they
    // are made: GCC otherwise reassociates a block's int32 adds and keeps the
    // first part's products (Q6_K: on the stack) while the second part is
    // decoded.
    MOE_ALWAYS_INLINE static __m256i part_sums(const Part &x, const uint8_t *a, int i, __m256i acc) {
        for (int n = 0; n < 2; ++n) {
            const uint8_t *an = a + 128 * i + 64 * n;
            const __m256i s = _mm256_add_epi16(_mm256_maddubs_epi16(x.v[2 * n], load256(an)),
                                               _mm256_maddubs_epi16(x.v[2 * n + 1], load256(an + 32)));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(s, x.sc[n]));
            asm("" : "+x"(acc));
        }
        return acc;
    }
};

// Q4_K / Q5_K: run k (quant bytes 32k..32k+31) holds sub-block 2k in its low
// nibbles and 2k + 1 in its high ones. Pair i = 2p + n (p = 0, 1; n = 0: low,
// 1: high nibbles) takes sub-block 4p + n in its low 128-bit lane and 4p + 2
// + n in its high lane, in two registers v[2i + y] from the 64 quant bytes q
// of runs 2p and 2p + 1: y = 0 holds bytes 0..15 | 48..63 (the loads at q
// and q + 32 blended), y = 1 bytes 16..31 | 32..47 (the load at q + 16), so
// no register takes a lane insert (one vpblendd for two vinserti128). Both
// registers of a pair have one sub-block per lane, so their int16 pair sums
// are added (|sum| <= 2 * 2 * 31 * 127 < 2^15) and take one vpmaddwd by the
// pair's two scales: eight vpmaddubsw, four int16 adds and four vpmaddwd per
// super-block and token, and no shuffle of the quants.
template <bool kFive>
struct Q45K : PairedParts<kFive ? q5_k::bytes : q4_k::bytes, true> {
    using Base = PairedParts<kFive ? q5_k::bytes : q4_k::bytes, true>;
    using typename Base::Part;
    static constexpr size_t kQs = kFive ? q5_k::qs : q4_k::qs;

    // Register v[2i + y] of pair i = 2p + n meets the activation quants of its
    // elements (sub-block s at 32s): 128p + 32n + 16y.. in its low lane and
    // 128p + 32n + 64 + 16(1 - y).. in its high lane; stored at 64i + 32y.
    static void arrange(const uint8_t *qs, uint8_t *out) {
        for (int i = 0; i < 4; ++i)
            for (int y = 0; y < 2; ++y)
                _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + 64 * i + 32 * y),
                                    lane_pieces(qs + 128 * (i / 2) + 32 * (i % 2) + 16 * y, 80 - 32 * y));
    }

    // vpshufb controls of the pair scales: pair i = 2p + n takes scale byte
    // 4p + n (low lane) and 4p + 2 + n (high lane), widened to int16.
    static constexpr std::array<int8_t, 128> pair_scale_picks() {
        std::array<int8_t, 128> c{};
        for (int i = 0; i < 4; ++i)
            for (int b = 0; b < 32; ++b)
                c[32 * i + b] = static_cast<int8_t>(b % 2 ? -1 : 4 * (i / 2) + i % 2 + (b < 16 ? 0 : 2));
        return c;
    }
    static constexpr std::array<int8_t, 128> kScalePicks = pair_scale_picks();

    // The context of a block: its eight six-bit scales as bytes 0..7 of both lanes.
    MOE_ALWAYS_INLINE static __m256i context(const uint8_t *w, uint64_t &mins, uint32_t &dm) {
        const __m128i head = k_head(w, dm);
        mins = static_cast<uint64_t>(_mm_extract_epi64(head, 1));
        return _mm256_broadcastq_epi64(head);
    }
    MOE_ALWAYS_INLINE static __m256i start(__m256i, const uint8_t *) { return _mm256_setzero_si256(); }

    // Part p: pairs 2p (v[0], v[1]) and 2p + 1 (v[2], v[3]).
    MOE_ALWAYS_INLINE static Part part(const uint8_t *w, __m256i s8, int p) {
        const uint8_t *q = w + kQs + 64 * p;
        const __m256i low4 = _mm256_set1_epi8(0x0F);
        const __m256i b[2] = {_mm256_blend_epi32(load256(q), load256(q + 32), 0xF0), load256(q + 16)};
        Part x;
        for (int y = 0; y < 2; ++y) {
            x.v[y] = _mm256_and_si256(b[y], low4);
            x.v[2 + y] = _mm256_and_si256(_mm256_srli_epi16(b[y], 4), low4);
        }
        if constexpr (kFive) {
            // qh byte e, bit s: the fifth bit of element e of sub-block s, so
            // register y needs bits 4p + n (low lane) and 4p + 2 + n (high lane)
            // of the qh bytes of its elements: bytes 0..15 | 16..31 (y = 0),
            // 16..31 | 0..15 (y = 1: the loads at qh + 16 and qh - 16 blended,
            // both inside the block). For p = 0 the bytes are shifted left by 4:
            // each bit tested is then 16 or more, and vpminub makes it 16.
            const __m256i sel[2] = {_mm256_setr_m128i(_mm_set1_epi8(0x10), _mm_set1_epi8(0x40)),
                                    _mm256_setr_m128i(_mm_set1_epi8(0x20), _mm_set1_epi8(static_cast<char>(0x80)))};
            const __m256i bit4 = _mm256_set1_epi8(0x10);
            static_assert(q5_k::qh >= 16);
            const uint8_t *qh = w + q5_k::qh;
            __m256i h[2] = {load256(qh), _mm256_blend_epi32(load256(qh + 16), load256(qh - 16), 0xF0)};
            for (int y = 0; y < 2; ++y) {
                if (p == 0) h[y] = _mm256_slli_epi16(h[y], 4);
                for (int n = 0; n < 2; ++n)
                    x.v[2 * n + y] = _mm256_or_si256(x.v[2 * n + y], _mm256_min_epu8(_mm256_and_si256(h[y], sel[n]), bit4));
            }
        }
        for (int n = 0; n < 2; ++n) x.sc[n] = _mm256_shuffle_epi8(s8, load256(kScalePicks.data() + 64 * p + 32 * n));
        return x;
    }

    // The heads of 8 super-blocks `stride` bytes apart (consecutive in a
    // row, or the same block of eight rows), decoded two per register.
    struct Head {
        __m256i dm;     // lane j: d | dmin << 16 of block j
        __m256i sm[4];  // low (high) 128-bit lane of sm[i]: k_scales_mins2 of block 2i (2i + 1)
    };
    MOE_ALWAYS_INLINE static Head head8(const uint8_t *w, size_t stride) {
        __m256i x[4];
        Head h;
        for (int i = 0; i < 4; ++i) {
            x[i] = _mm256_loadu2_m128i(reinterpret_cast<const __m128i *>(w + (2 * i + 1) * stride),
                                       reinterpret_cast<const __m128i *>(w + 2 * i * stride));
            h.sm[i] = k_scales_mins2(x[i]);
        }
        // Dword 0 of each lane: lanes 0..3 blocks 0, 2, 4, 6; 4..7 blocks 1, 3, 5, 7.
        const __m256i v = _mm256_unpacklo_epi64(_mm256_unpacklo_epi32(x[0], x[1]), _mm256_unpacklo_epi32(x[2], x[3]));
        h.dm = _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        return h;
    }
    // sum_s m_s * bpair_s for the eight blocks of h against the pair sums
    // from bpair: of eight consecutive blocks, or of one (kOneBlock: the same
    // block of eight rows).
    template <bool kOneBlock>
    MOE_ALWAYS_INLINE static __m256i min_sums8(const Head &h, const int16_t *bpair) {
        __m256i m[4];
        for (int i = 0; i < 4; ++i) {
            const __m256i bp = kOneBlock ? _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(bpair)))
                                         : load256(bpair + 16 * i);
            m[i] = _mm256_madd_epi16(_mm256_unpackhi_epi8(h.sm[i], _mm256_setzero_si256()), bp);
        }
        return block_pair_totals8(m);
    }
    // The context of block J of the group whose head is h.
    template <int J>
    MOE_ALWAYS_INLINE static __m256i context(const uint8_t *, const Head &h) {
        return _mm256_permute4x64_epi64(h.sm[J / 2], J % 2 ? 0xAA : 0x00);
    }
};

// vpshufb controls that widen int16 sources: word k (64 bits) of the result
// takes, in each of its four int16, int16 pick[k] of its 128-bit lane.
constexpr std::array<int8_t, 32> word_int16_picks(std::array<int, 4> pick) {
    std::array<int8_t, 32> c{};
    for (int k = 0; k < 4; ++k)
        for (int p = 0; p < 4; ++p) {
            c[8 * k + 2 * p] = static_cast<int8_t>(2 * pick[k]);
            c[8 * k + 2 * p + 1] = static_cast<int8_t>(2 * pick[k] + 1);
        }
    return c;
}

// Q6_K: per half h (elements 128h..128h+127: ql bytes 64h.., qh bytes 32h..),
// the 64 ql bytes as eight 64-bit words c = 0..7 (low nibbles: elements
// 8c..8c+7 of the half, high nibbles 64 + 8c..), two registers of words
// R = (0, 5, 2, 7) and S = (1, 4, 3, 6), each from two loads and a blend.
// Word k of R and of S then belongs to the same 16-element group: groups 0,
// 2, 1, 3 of the half for the low nibbles, 4, 6, 5, 7 for the high ones, so
// the int16 pair sums of R and S are added (|sum| <= 2 * 2 * 63 * 127 <
// 2^15) before one vpmaddwd by the group scales. The qh words R needs are
// qh's own (words 0..3), S's are qh with neighbouring words swapped; their
// two bits are bits 0-1 / 4-5 (low / high nibbles) for words of elements
// 0..31 and 2-3 / 6-7 for 32..63, so one vpsrlvq by (0, 2, 0, 2) aligns them.
// Quants stored +32 (0..63); the offset is removed with the activation group
// sums (-32 * scale of group g times bsum g).
struct Q6K : PairedParts<q6_k::bytes, false> {
    // The context of a block: its 16 group scales as int16 and the offset
    // correction (int16 -32 * scale of group g).
    struct Context {
        __m256i sc16, corr;
    };

    // R and S of the 64 bytes at p (the ql bytes of a half, or the activation
    // quants they meet): words (0, 5, 2, 7) and (1, 4, 3, 6).
    MOE_ALWAYS_INLINE static void words(const uint8_t *p, __m256i &r, __m256i &s) {
        r = _mm256_blend_epi32(load256(p), load256(p + 32), 0xCC);
        s = _mm256_blend_epi32(load256(p + 8), load256(p + 24), 0xCC);
    }

    // Part h's register v[i] meets the activation quants of its words at 128h + 32i.
    static void arrange(const uint8_t *qs, uint8_t *out) {
        for (int h = 0; h < 2; ++h)
            for (int n = 0; n < 2; ++n) {
                __m256i r, s;
                words(qs + 128 * h + 64 * n, r, s);
                _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + 128 * h + 64 * n), r);
                _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + 128 * h + 64 * n + 32), s);
            }
    }

    static constexpr std::array<int8_t, 32> kLowScales = word_int16_picks({0, 2, 1, 3});
    static constexpr std::array<int8_t, 32> kHighScales = word_int16_picks({4, 6, 5, 7});

    MOE_ALWAYS_INLINE static Context context(const uint8_t *w, uint64_t &mins, uint32_t &dm) {
        mins = 0;
        dm = load_u32(w + q6_k::d - 2);
        const __m256i sc16 =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(w + q6_k::scales)));
        return {sc16, _mm256_mullo_epi16(sc16, _mm256_set1_epi16(-32))};
    }
    // The offset correction against the activation's group sums.
    MOE_ALWAYS_INLINE static __m256i start(const Context &c, const uint8_t *act) {
        return _mm256_madd_epi16(load256(act + q8_k::bsums), c.corr);
    }

    // Part h (half h): v[0], v[1] = R, S low nibbles; v[2], v[3] = R, S high nibbles.
    MOE_ALWAYS_INLINE static Part part(const uint8_t *w, const Context &c, int h) {
        const __m256i low4 = _mm256_set1_epi8(0x0F), two = _mm256_set1_epi8(0x30);
        const __m256i qh = load256(w + q6_k::qh + 32 * h);
        const __m256i align = _mm256_setr_epi64x(0, 2, 0, 2);
        __m256i q[2];
        words(w + q6_k::ql + 64 * h, q[0], q[1]);
        const __m256i hb[2] = {_mm256_srlv_epi64(qh, align), _mm256_srlv_epi64(_mm256_shuffle_epi32(qh, 0x4E), align)};
        Part x;
        for (int i = 0; i < 2; ++i) {
            x.v[i] = _mm256_or_si256(_mm256_and_si256(q[i], low4), _mm256_and_si256(_mm256_slli_epi16(hb[i], 4), two));
            x.v[2 + i] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q[i], 4), low4), _mm256_and_si256(hb[i], two));
        }
        // The immediate must be a constant even when part() is not inlined (sanitizer builds).
        const __m256i scales = h ? _mm256_permute2x128_si256(c.sc16, c.sc16, 0x11)
                                 : _mm256_permute2x128_si256(c.sc16, c.sc16, 0x00);
        x.sc[0] = _mm256_shuffle_epi8(scales, load256(kLowScales.data()));
        x.sc[1] = _mm256_shuffle_epi8(scales, load256(kHighScales.data()));
        return x;
    }

};

}  // namespace
}  // namespace moe::kernels::detail
