// Row kernels shared by the AVX2 and AVX-512 files (see tiled.hpp for the
// interface): activation preparation, the loop over groups of 8 weight
// blocks, and the float epilogue. The integer block sums come from an
// ISA-specific decoder D; everything here uses AVX2-level instructions, and
// each ISA file compiles its own copy (internal linkage).
//
// Float order (kernels.hpp): block b's term goes to lane b % 8. A group of 8
// consecutive blocks starting at a multiple of 8 adds its 8 terms to the 8
// lanes of a vector at once, which is the same sequence of float operations
// per lane as the scalar loop.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/blocks.hpp"
#include "kernels/dot_terms.hpp"
#include "kernels/simd_avx2_blocks.hpp"
#include "kernels/tiled.hpp"

namespace moe::kernels::detail {
namespace {

using namespace avx2;

// Eight 32-bit words `stride` bytes apart.
template <size_t kStride>
MOE_ALWAYS_INLINE __m256i gather8_u32(const uint8_t *p) {
    // Register moves and unpacks: vpgatherdd is slow on some CPUs, and a
    // vector built through a stack array stalls on store forwarding.
    __m128i v[8];
    for (int j = 0; j < 8; ++j) v[j] = _mm_cvtsi32_si128(static_cast<int>(load_u32(p + j * kStride)));
    const __m128i lo = _mm_unpacklo_epi64(_mm_unpacklo_epi32(v[0], v[1]), _mm_unpacklo_epi32(v[2], v[3]));
    const __m128i hi = _mm_unpacklo_epi64(_mm_unpacklo_epi32(v[4], v[5]), _mm_unpacklo_epi32(v[6], v[7]));
    return _mm256_setr_m128i(lo, hi);
}

// Software prefetch of the weights kPrefetchAhead bytes ahead of [p, p + kBytes):
// the rows are streamed once, and the hardware prefetcher alone falls behind.
// NTA, because each weight byte is used once per step: it keeps the stream
// from evicting the activations and scales from L1/L2. 8 KiB ahead is also
// two calls ahead for eight short rows at a time (rows8 advances 3.5-5 KiB
// per call); one call ahead measured 6-7% slower there.
constexpr size_t kPrefetchAhead = 8192;
constexpr auto kPrefetchHint = _MM_HINT_NTA;
// One prefetch of the line holding p that stays where it is written. The
// compiler schedules the intrinsic freely: in loops unrolled over a group of
// blocks it issued all of a group's prefetches at the group's start, which
// measured 1.05-1.15x slower while streaming than one block's at a time.
MOE_ALWAYS_INLINE void prefetch_in_place(const uint8_t *p) {
    static_assert(kPrefetchHint == _MM_HINT_NTA, "the instruction below is the NTA prefetch");
    asm volatile("prefetchnta %0" : : "m"(*p));
}
// kInPlace: each prefetch stays where it is written (prefetch_in_place),
// for loops unrolled over blocks.
template <size_t kBytes, bool kInPlace = false>
MOE_ALWAYS_INLINE void prefetch_ahead(const uint8_t *p) {
    for (size_t off = 0; off < kBytes; off += 64) {
        if constexpr (kInPlace) prefetch_in_place(p + kPrefetchAhead + off);
        else _mm_prefetch(reinterpret_cast<const char *>(p + kPrefetchAhead + off), kPrefetchHint);
    }
}

// The low (kHigh = false) or high 16 bits of each 32-bit lane, read as fp16.
template <bool kHigh>
MOE_ALWAYS_INLINE __m256 half8(__m256i words) {
    const __m256i sel = kHigh ? _mm256_setr_epi8(2, 3, 6, 7, 10, 11, 14, 15, -1, -1, -1, -1, -1, -1, -1, -1, 2, 3, 6,
                                                 7, 10, 11, 14, 15, -1, -1, -1, -1, -1, -1, -1, -1)
                              : _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 4,
                                                 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(words, sel), 0x08);
    return _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
}

// 32 int8 -> 8 int32 partial sums.
MOE_ALWAYS_INLINE __m256i block_partial_sums(const uint8_t *q) {
    const __m256i a = load256(q);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), a), _mm256_set1_epi16(1));
}

// Per group of 8 blocks of 32 quants: 64-byte row e holds quants 8e..8e+7 of
// blocks order[0..7] (an 8 x 4 transpose of 64-bit words).
inline void arrange_qwords(const uint8_t *act, size_t blk_bytes, size_t qs, int64_t nb, const int *order,
                           uint8_t *out) {
    for (int64_t g = 0; g + 8 <= nb; g += 8, out += 256)
        for (int h = 0; h < 2; ++h) {
            const uint8_t *a = act + g * blk_bytes + qs;
            const int *o4 = order + 4 * h;
            const __m256i y0 = load256(a + o4[0] * blk_bytes);
            const __m256i y1 = load256(a + o4[1] * blk_bytes);
            const __m256i y2 = load256(a + o4[2] * blk_bytes);
            const __m256i y3 = load256(a + o4[3] * blk_bytes);
            const __m256i t0 = _mm256_unpacklo_epi64(y0, y1), t1 = _mm256_unpackhi_epi64(y0, y1);
            const __m256i t2 = _mm256_unpacklo_epi64(y2, y3), t3 = _mm256_unpackhi_epi64(y2, y3);
            uint8_t *o = out + 32 * h;
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(o), _mm256_permute2x128_si256(t0, t2, 0x20));
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(o + 64), _mm256_permute2x128_si256(t1, t3, 0x20));
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(o + 128), _mm256_permute2x128_si256(t0, t2, 0x31));
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(o + 192), _mm256_permute2x128_si256(t1, t3, 0x31));
        }
}

// --- legacy blocks (32 elements) against Q8_0 / Q8_1 -----------------------------
//
// D provides: kBytes, kD (fp16 d; for kMin the fp16 m follows it), kMin (Q8_1
// family: term_dm), kOffset (weights are decoded unsigned as q + kOffset; the
// kernel subtracts kOffset * sum(activation block)), kArranged + arrange()
// (a per-token copy of the activations in the decoder's order for groups of 8
// blocks, 32 bytes per block), Group decode8(w) (with the f32 weight scales dw
// and, for kMin, mins mw of the 8 blocks), __m256i sum8(group, a, a_stride) (lane j = the raw
// sum of block j against one token, whose a is its arranged group or its
// first activation block's quants), int32_t sum1(w, a_qs) (raw sum of one
// block). A decoder that dots part of a group against every token before
// decoding the next part provides sums8<T>(group, a, a_stride, out) instead
// (out[t] = token t's sum8, a[t] its activations). A decoder with
// kMagnitudes takes one token's sums from sum8_by_magnitude(group, a, m)
// instead, m the magnitudes of its arranged activations (|a|, prepared once
// per call after them).
// A legacy decoder's weight scale: the fp16 d at kD, unless the decoder
// reads its own (scale1 and scales8, as MXFP4's exponent byte).
template <typename D>
MOE_ALWAYS_INLINE float weight_scale1(const uint8_t *w) {
    if constexpr (requires { D::scale1(w); }) return D::scale1(w);
    else return load_half(w + D::kD);
}

struct LegacyPrep {
    const uint8_t *act;       // activation blocks as given
    const uint8_t *arranged;  // D's layout of full groups (or act)
    const float *d;           // activation scale per block (f32)
    const float *s;           // Q8_1: stored s per block (f32)
    const int32_t *corr;      // kOffset * sum(q) per block
    const uint8_t *magnitudes;  // |arranged| (D::kMagnitudes), full groups
};

template <typename D>
struct LegacyRows {
    using Prep = LegacyPrep;
    static constexpr int64_t kBlockElems = 32;
    static constexpr size_t kActBytes = D::kMin ? q8_1::bytes : q8_0::bytes;
    static constexpr size_t kActQs = D::kMin ? q8_1::qs : q8_0::qs;

    static constexpr bool kMagnitudes = [] {
        if constexpr (requires { D::kMagnitudes; }) return D::kMagnitudes;
        else return false;
    }();

    static size_t prep_bytes(int64_t nb) {
        return 3 * 4 * static_cast<size_t>(nb + 8) + (D::kArranged ? 32 * static_cast<size_t>(nb) : 0) +
               (kMagnitudes ? 32 * static_cast<size_t>(nb) : 0);
    }

    // Runs once per token and call: vectorised over groups of 8 blocks.
    static Prep prepare(const uint8_t *act, int64_t nb, uint8_t *space) {
        float *d = reinterpret_cast<float *>(space);
        float *s = d + nb + 8;
        int32_t *corr = reinterpret_cast<int32_t *>(s + nb + 8);
        uint8_t *arranged = reinterpret_cast<uint8_t *>(corr + nb + 8);
        int64_t b = 0;
        for (; b + 8 <= nb; b += 8) {
            const uint8_t *blk = act + b * kActBytes;
            const __m256i fields = gather8_u32<kActBytes>(blk);  // d | s << 16
            _mm256_storeu_ps(d + b, half8<false>(fields));
            if constexpr (D::kMin) _mm256_storeu_ps(s + b, half8<true>(fields));
            if constexpr (D::kOffset != 0) {
                __m256i sums[8];
                for (int j = 0; j < 8; ++j) sums[j] = block_partial_sums(blk + j * kActBytes + kActQs);
                const __m256i total = _mm256_mullo_epi32(transpose_sum8(sums), _mm256_set1_epi32(D::kOffset));
                _mm256_storeu_si256(reinterpret_cast<__m256i *>(corr + b), total);
            }
        }
        for (; b < nb; ++b) {
            const uint8_t *blk = act + b * kActBytes;
            d[b] = load_half(blk);
            if constexpr (D::kMin) s[b] = load_half(blk + q8_1::s);
            if constexpr (D::kOffset != 0) corr[b] = D::kOffset * hsum_i32(block_partial_sums(blk + kActQs));
        }
        if constexpr (D::kArranged) {
            D::arrange(act, kActBytes, kActQs, nb, arranged);
            // Apart from the arranged copy, so that several tokens, which
            // do not read them, keep the arranged copy's layout (interleaved
            // per group they made four tokens 1.1x slower).
            uint8_t *magnitudes = nullptr;
            if constexpr (kMagnitudes) {
                magnitudes = arranged + 32 * nb;
                for (int64_t i = 0; i < 32 * (nb / 8 * 8); i += 32)
                    _mm256_storeu_si256(reinterpret_cast<__m256i *>(magnitudes + i),
                                        _mm256_abs_epi8(load256(arranged + i)));
            }
            return {act, arranged, d, s, corr, magnitudes};
        }
        return {act, act, d, s, corr, nullptr};
    }

    template <int T>
    static void row(const uint8_t *w, const Prep *p, int64_t nb, float *out) {
        __m256 acc[T];
        for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
        int64_t b = 0;
        for (; b + 8 <= nb; b += 8, w += 8 * D::kBytes) {
            prefetch_ahead<8 * D::kBytes>(w);
            const typename D::Group g = D::decode8(w);
            const uint8_t *a[T];
            for (int t = 0; t < T; ++t)
                a[t] = D::kArranged ? p[t].arranged + 32 * b : p[t].act + b * kActBytes + kActQs;
            __m256i sums[T];
            if constexpr (kMagnitudes && T == 1)
                sums[0] = D::sum8_by_magnitude(g, a[0], p[0].magnitudes + 32 * b);
            else if constexpr (requires { D::template sums8<T>(g, a, kActBytes, sums); })
                D::template sums8<T>(g, a, kActBytes, sums);
            else
                for (int t = 0; t < T; ++t) sums[t] = D::sum8(g, a[t], kActBytes);
            for (int t = 0; t < T; ++t) {
                __m256i sumi = sums[t];
                if constexpr (D::kOffset != 0)
                    sumi = _mm256_sub_epi32(sumi, load256(p[t].corr + b));
                const __m256 d = _mm256_mul_ps(g.dw, _mm256_loadu_ps(p[t].d + b));
                __m256 term = _mm256_mul_ps(_mm256_cvtepi32_ps(sumi), d);
                if constexpr (D::kMin)
                    term = _mm256_add_ps(term, _mm256_mul_ps(g.mw, _mm256_loadu_ps(p[t].s + b)));
                acc[t] = _mm256_add_ps(acc[t], term);
            }
        }
        for (int t = 0; t < T; ++t) {
            alignas(32) float lanes[8];
            _mm256_store_ps(lanes, acc[t]);
            const uint8_t *wb = w;
            for (int64_t bb = b; bb < nb; ++bb, wb += D::kBytes) {
                int32_t sumi = D::sum1(wb, p[t].act + bb * kActBytes + kActQs);
                if constexpr (D::kOffset != 0) sumi -= p[t].corr[bb];
                if constexpr (D::kMin)
                    lanes[bb & 7] += term_dm(sumi, load_half(wb + D::kD), p[t].d[bb], load_half(wb + D::kD + 2), p[t].s[bb]);
                else
                    lanes[bb & 7] += term_d(sumi, weight_scale1<D>(wb), p[t].d[bb]);
            }
            out[t] = BlockLanes::reduce8(lanes);
        }
    }
};

// Legacy block layouts (field offsets, the offset the unsigned weights are
// stored with, the largest unsigned weight kMaxWeight) for the group
// decoders, and uints(): one block decoded alone
// into 32 bytes in element order, for PerBlock below and the blocks after a
// row's last full group.
struct Q4_0Dec {
    static constexpr size_t kBytes = q4_0::bytes, kD = q4_0::d, kQs = q4_0::qs, kQh = 0;
    static constexpr bool kMin = false, kFive = false;
    static constexpr int32_t kOffset = 8;
    static constexpr int kMaxWeight = 15;
    MOE_ALWAYS_INLINE static __m256i uints(const uint8_t *b) { return nibbles32(b + kQs); }
};
struct Q5_0Dec {
    static constexpr size_t kBytes = q5_0::bytes, kD = q5_0::d, kQs = q5_0::qs, kQh = q5_0::qh;
    static constexpr bool kMin = false, kFive = true;
    static constexpr int32_t kOffset = 16;
    static constexpr int kMaxWeight = 31;
    MOE_ALWAYS_INLINE static __m256i uints(const uint8_t *b) { return _mm256_or_si256(nibbles32(b + kQs), high_bits32(b + kQh, 0x10)); }
};
struct Q4_1Dec {
    static constexpr size_t kBytes = q4_1::bytes, kD = q4_1::d, kM = q4_1::m, kQs = q4_1::qs, kQh = 0;
    static constexpr bool kMin = true, kFive = false;
    static constexpr int32_t kOffset = 0;
    static constexpr int kMaxWeight = 15;
    MOE_ALWAYS_INLINE static __m256i uints(const uint8_t *b) { return nibbles32(b + kQs); }
};
struct Q5_1Dec {
    static constexpr size_t kBytes = q5_1::bytes, kD = q5_1::d, kM = q5_1::m, kQs = q5_1::qs, kQh = q5_1::qh;
    static constexpr bool kMin = true, kFive = true;
    static constexpr int32_t kOffset = 0;
    static constexpr int kMaxWeight = 31;
    MOE_ALWAYS_INLINE static __m256i uints(const uint8_t *b) { return _mm256_or_si256(nibbles32(b + kQs), high_bits32(b + kQh, 0x10)); }
};
// Q8_0 made unsigned (+128), for unsigned-by-signed dot instructions.
struct Q8_0Dec {
    static constexpr size_t kBytes = q8_0::bytes, kD = q8_0::d;
    static constexpr bool kMin = false;
    static constexpr int32_t kOffset = 128;
    MOE_ALWAYS_INLINE static __m256i uints(const uint8_t *b) {
        return _mm256_xor_si256(load256(b + q8_0::qs), _mm256_set1_epi8(static_cast<char>(0x80)));
    }
};
// Q8_0 kept signed (dotted with the sign trick).
struct Q8_0SignedDec {
    static constexpr size_t kBytes = q8_0::bytes, kD = q8_0::d;
    static constexpr bool kMin = false;
    static constexpr int32_t kOffset = 0;
    MOE_ALWAYS_INLINE static __m256i uints(const uint8_t *b) { return load256(b + q8_0::qs); }
};

// 32 weights x 32 activations -> 8 int32 partial sums (run), and two such
// pairs of registers -> 8 int32 partial sums of both (pair).
struct DotMaddubs {  // unsigned weights (<= 31 after decoding)
    MOE_ALWAYS_INLINE static __m256i run(__m256i u, __m256i a) { return dot_u8_i8(u, a); }
    // The int16 pair sums of both (|sum| <= 2 * 2 * 31 * 128) are added before widening.
    MOE_ALWAYS_INLINE static __m256i pair(__m256i u0, __m256i a0, __m256i u1, __m256i a1) {
        return _mm256_madd_epi16(pair16(u0, a0, u1, a1), _mm256_set1_epi16(1));
    }
    // The same sums not yet widened: int16 lane i = the sum of the four products 2i, 2i + 1 of both.
    MOE_ALWAYS_INLINE static __m256i pair16(__m256i u0, __m256i a0, __m256i u1, __m256i a1) {
        return _mm256_add_epi16(_mm256_maddubs_epi16(u0, a0), _mm256_maddubs_epi16(u1, a1));
    }
};
struct DotSigned {  // signed weights
    MOE_ALWAYS_INLINE static __m256i run(__m256i w, __m256i a) { return dot_i8_signed(w, a); }
    // Pair sums up to 2 * 127 * 127 each: widened separately.
    MOE_ALWAYS_INLINE static __m256i pair(__m256i w0, __m256i a0, __m256i w1, __m256i a1) {
        return _mm256_add_epi32(run(w0, a0), run(w1, a1));
    }
    // The same sums against activations a given with their magnitudes m
    // (|a|, 128 for -128): m (unsigned) times w with a's sign, pair sums up
    // to 2 * 128 * 127 (w never -128).
    MOE_ALWAYS_INLINE static __m256i run_by_magnitude(__m256i w, __m256i a, __m256i m) {
        return _mm256_madd_epi16(_mm256_maddubs_epi16(m, _mm256_sign_epi8(w, a)), _mm256_set1_epi16(1));
    }
    MOE_ALWAYS_INLINE static __m256i pair_by_magnitude(__m256i w0, __m256i a0, __m256i m0, __m256i w1, __m256i a1,
                                                       __m256i m1) {
        return _mm256_add_epi32(run_by_magnitude(w0, a0, m0), run_by_magnitude(w1, a1, m1));
    }
};

// A legacy decoder (LegacyRows' D) that dots each block separately and
// transposes the eight per-block vectors into one vector of block sums.
template <typename B, typename Dot>
struct PerBlock : B {
    static constexpr bool kArranged = false;
    struct Group {
        __m256i u[8];
        __m256 dw, mw;
    };
    MOE_ALWAYS_INLINE static Group decode8(const uint8_t *w) {
        Group g;
        for (int j = 0; j < 8; ++j) g.u[j] = B::uints(w + j * B::kBytes);
        if constexpr (requires { B::scales8(w); }) {
            g.dw = B::scales8(w);
        } else {
            const __m256i fields = gather8_u32<B::kBytes>(w + B::kD);  // d | m << 16
            g.dw = half8<false>(fields);
            if constexpr (B::kMin) {
                static_assert(B::kM == B::kD + 2, "m is the fp16 after d, in the same 32-bit load");
                g.mw = half8<true>(fields);
            }
        }
        return g;
    }
    MOE_ALWAYS_INLINE static __m256i sum8(const Group &g, const uint8_t *a, size_t a_stride) {
        __m256i s[8];
        for (int j = 0; j < 8; ++j) s[j] = Dot::run(g.u[j], load256(a + j * a_stride));
        return transpose_sum8(s);
    }
    MOE_ALWAYS_INLINE static int32_t sum1(const uint8_t *w, const uint8_t *a) {
        return hsum_i32(Dot::run(B::uints(w), load256(a)));
    }
};

// Four vectors of int32 terms, m[i] those of block 2i in its low 128-bit lane
// and of block 2i + 1 in its high lane -> lane j = the total of block j.
MOE_ALWAYS_INLINE __m256i block_pair_totals8(const __m256i *m) {
    const __m256i r = Sum256::quad(Sum256::pair(m[0], m[1]), Sum256::pair(m[2], m[3]));
    return _mm256_permutevar8x32_epi32(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// --- K-quants (256-element super-blocks) against Q8_K ------------------------------
//
// D provides: kBytes, kMins (Q4_K/Q5_K: term_k_min with 6-bit mins; Q6_K:
// term_k), kArranged + arrange(qs, out) (256 activation quants reordered for
// the decoder, or kArrangedBytes of per-token data of D's own choosing), Block decode(w, uint64_t &mins, uint32_t &dm) (mins: the 8
// six-bit mins as bytes; dm: the fp16 fields, d | dmin << 16 with mins, else
// d << 16), Partial sums(block, a_arranged, act_block) (int32 partial sums
// whose total is sumi) and __m256i total8(const Partial *) (lane j = total of
// partial j). A decoder with mins per 16-element group (Q2_K) sets
// kGroupMins and provides group_min_sums8(w, w_stride, act, act_stride, cnt)
// (the weight blocks' mins against the activation blocks).
struct KPrep {
    const uint8_t *act;       // Q8_K blocks as given
    const uint8_t *arranged;  // D's order of the quants (or act)
    const float *d;           // activation scale per super-block
    const int16_t *bpair;     // bsums[2s] + bsums[2s+1], 8 per super-block, zero padded
};

template <typename D>
struct KRows {
    using Prep = KPrep;
    static constexpr int64_t kBlockElems = 256;

    // Bytes of D's arranged activations per super-block (D::kArrangedBytes,
    // 256 unless D keeps more there).
    static constexpr size_t kArrangedBytes = [] {
        if constexpr (requires { D::kArrangedBytes; }) return D::kArrangedBytes;
        else return D::kArranged ? size_t{256} : size_t{0};
    }();

    static size_t prep_bytes(int64_t nb) {
        return kArrangedBytes * static_cast<size_t>(nb) + 4 * static_cast<size_t>(nb + 8) +
               16 * static_cast<size_t>(nb + 8);
    }

    // The arranged activations come first, so their 64-byte loads stay
    // inside cache lines (the per-token space is 64-byte aligned).
    static Prep prepare(const uint8_t *act, int64_t nb, uint8_t *space) {
        uint8_t *arranged = space;
        float *d = reinterpret_cast<float *>(space + kArrangedBytes * nb);
        int16_t *bpair = reinterpret_cast<int16_t *>(d + nb + 8);
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t *blk = act + b * q8_k::bytes;
            d[b] = load_f32(blk + q8_k::d);
            // |bsum| <= 16 * 127, so the pair sums fit int16.
            const __m256i pairs = _mm256_madd_epi16(load256(blk + q8_k::bsums), _mm256_set1_epi16(1));
            const __m256i packed = _mm256_permute4x64_epi64(_mm256_packs_epi32(pairs, pairs), 0x08);
            _mm_storeu_si128(reinterpret_cast<__m128i *>(bpair + 8 * b), _mm256_castsi256_si128(packed));
            if constexpr (D::kArranged) D::arrange(blk + q8_k::qs, arranged + kArrangedBytes * b);
        }
        std::memset(bpair + 8 * nb, 0, 8 * 8 * sizeof(int16_t));
        return {act, D::kArranged ? arranged : act, d, bpair};
    }

    // sum_s m_s * bpair_s for 8 super-blocks (mins as bytes, 8 per block).
    MOE_ALWAYS_INLINE static __m256i min_sums8(const uint64_t *mins, const int16_t *bpair) {
        __m256i m[4];
        for (int i = 0; i < 4; ++i) {
            const __m256i mw = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(mins + 2 * i)));
            m[i] = _mm256_madd_epi16(mw, load256(bpair + 16 * i));
        }
        return block_pair_totals8(m);
    }

    template <int T>
    static void row(const uint8_t *w, const Prep *p, int64_t nb, float *out) {
        __m256 acc[T];
        for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b += 8, w += 8 * D::kBytes) {
            const int cnt = nb - b < 8 ? static_cast<int>(nb - b) : 8;
            typename D::Partial s[T][8];
            alignas(64) uint64_t mins[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            alignas(32) uint32_t dm[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (int j = 0; j < 8; ++j) {
                if (j >= cnt) {
                    for (int t = 0; t < T; ++t) s[t][j] = typename D::Partial{};
                    continue;
                }
                prefetch_ahead<D::kBytes>(w + j * D::kBytes);
                const typename D::Block blk = D::decode(w + j * D::kBytes, mins[j], dm[j]);
                for (int t = 0; t < T; ++t)
                    s[t][j] = D::sums(blk, p[t].arranged + (D::kArranged ? kArrangedBytes : q8_k::bytes) * (b + j),
                                      p[t].act + q8_k::bytes * (b + j));
            }
            for (int t = 0; t < T; ++t) {
                const __m256i sumi = D::total8(s[t]);
                const __m256i summ = D::kMins ? block_min_sums8(w, mins, p[t], b, cnt) : _mm256_setzero_si256();
                const __m256 da = _mm256_loadu_ps(p[t].d + b);
                if (cnt == 8) {
                    acc[t] = _mm256_add_ps(acc[t], terms8(dm, sumi, summ, da));
                    continue;
                }
                alignas(32) float lanes[8], dav[8];
                alignas(32) int32_t si[8], sm[8];
                _mm256_store_ps(lanes, acc[t]);
                _mm256_store_ps(dav, da);
                _mm256_store_si256(reinterpret_cast<__m256i *>(si), sumi);
                _mm256_store_si256(reinterpret_cast<__m256i *>(sm), summ);
                for (int j = 0; j < cnt; ++j) lanes[j] += term1(dm[j], si[j], sm[j], dav[j]);
                acc[t] = _mm256_load_ps(lanes);
            }
        }
        for (int t = 0; t < T; ++t) {
            alignas(32) float lanes[8];
            _mm256_store_ps(lanes, acc[t]);
            out[t] = BlockLanes::reduce8(lanes);
        }
    }

    // Rows shorter than one group (fewer than 8 super-blocks, such as the
    // 768-element rows of small expert down projections) waste most of the
    // group epilogue and fall to one term at a time in row(). Eight such rows
    // are taken together instead: super-block j of rows 0..7 forms the group,
    // so lane i of every vector belongs to row i and all rows share block j's
    // activation. Each row gets the same terms as row() gives it (lane j of
    // its accumulator: 0 + term_j), summed in the same pairwise order.
    static bool short_rows(int64_t nb) { return nb < 8; }

    template <int T>
    static void rows8(const uint8_t *w, size_t row_bytes, const Prep *p, int64_t nb, float (*out)[8]) {
        // Decoders with mins (per pair of groups, or per group: kGroupMins)
        // take KRowsUnrolled, whose rows8 hides this one.
        static_assert(!D::kMins && !requires { D::kGroupMins; }, "KRows::rows8 serves decoders without mins only");
        alignas(32) float terms[T][8][8] = {};  // [token][super-block j][row i]
        for (int64_t j = 0; j < nb; ++j) {
            typename D::Partial s[T][8];
            alignas(64) uint64_t mins[8];
            alignas(32) uint32_t dm[8];
            for (int i = 0; i < 8; ++i) {
                const uint8_t *wb = w + static_cast<size_t>(i) * row_bytes + j * D::kBytes;
                prefetch_ahead<D::kBytes>(wb);
                const typename D::Block blk = D::decode(wb, mins[i], dm[i]);
                for (int t = 0; t < T; ++t)
                    s[t][i] = D::sums(blk, p[t].arranged + (D::kArranged ? kArrangedBytes : q8_k::bytes) * j,
                                      p[t].act + q8_k::bytes * j);
            }
            for (int t = 0; t < T; ++t) {
                const __m256i sumi = D::total8(s[t]);
                const __m256 term = terms8(dm, sumi, _mm256_setzero_si256(), _mm256_set1_ps(p[t].d[j]));
                _mm256_store_ps(terms[t][j], _mm256_add_ps(_mm256_setzero_ps(), term));
            }
        }
        for (int t = 0; t < T; ++t) reduce_rows8(terms[t], out[t]);
    }

    // BlockLanes::reduce8 of eight rows at once: lanes[j] holds lane j of each row.
    MOE_ALWAYS_INLINE static void reduce_rows8(const float (*lanes)[8], float *out) {
        const auto lane = [&](int j) { return _mm256_load_ps(lanes[j]); };
        const __m256 a0 = _mm256_add_ps(lane(0), lane(4)), a1 = _mm256_add_ps(lane(1), lane(5));
        const __m256 a2 = _mm256_add_ps(lane(2), lane(6)), a3 = _mm256_add_ps(lane(3), lane(7));
        _mm256_storeu_ps(out, _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3)));
    }

    // dm: the block's fp16 fields as decode() gives them (d | dmin << 16, or d << 16).
    MOE_ALWAYS_INLINE static float term1(uint32_t dm, int32_t sumi, int32_t summ, float da) {
        const auto half = [](uint32_t h) { return half_to_f32(static_cast<uint16_t>(h)); };
        if constexpr (D::kMins) return term_k_min(sumi, summ, half(dm & 0xFFFF), half(dm >> 16), da);
        else return term_k(sumi, half(dm >> 16), da);
    }

    // sum_g m_g * bsum_g of the super-blocks b .. b + cnt - 1 (weights from
    // w): D's own for mins per 16-element group (kGroupMins), else the 6-bit
    // mins per pair of groups decode() gave.
    MOE_ALWAYS_INLINE static __m256i block_min_sums8(const uint8_t *w, const uint64_t *mins, const Prep &p, int64_t b,
                                                     int cnt) {
        if constexpr (requires { D::kGroupMins; })
            return D::group_min_sums8(w, D::kBytes, p.act + q8_k::bytes * b, q8_k::bytes, cnt);
        else
            return min_sums8(mins, p.bpair + 8 * b);
    }

    // The terms of 8 full super-blocks (same operations as term_k_min / term_k).
    MOE_ALWAYS_INLINE static __m256 terms8(const uint32_t *dm, __m256i sumi, __m256i summ, __m256 da) {
        return terms8(_mm256_load_si256(reinterpret_cast<const __m256i *>(dm)), sumi, summ, da);
    }
    // fields: lane j = the fp16 pair d | dmin << 16 (Q6_K: d << 16) of super-block j.
    MOE_ALWAYS_INLINE static __m256 terms8(__m256i fields, __m256i sumi, __m256i summ, __m256 da) {
        if constexpr (D::kMins) {
            const __m256 t1 = _mm256_mul_ps(_mm256_mul_ps(half8<false>(fields), da), _mm256_cvtepi32_ps(sumi));
            const __m256 t2 = _mm256_mul_ps(_mm256_mul_ps(half8<true>(fields), da), _mm256_cvtepi32_ps(summ));
            return _mm256_sub_ps(t1, t2);
        } else {
            return _mm256_mul_ps(_mm256_mul_ps(half8<true>(fields), da), _mm256_cvtepi32_ps(sumi));
        }
    }
};

// The frame of the 256-bit K-quant decoders (KRows' and KRowsUnrolled's D):
// int32 vectors of partial sums, reduced by transpose_sum8's network, all
// eight at once (total8) or as they come (Fold). kArrangedActs: D arranges
// each token's activations (D::arrange).
template <size_t kBlockBytes, bool kHasMins, bool kArrangedActs>
struct KDecoder256 {
    static constexpr size_t kBytes = kBlockBytes;
    static constexpr bool kMins = kHasMins, kArranged = kArrangedActs;
    using Partial = __m256i;
    using Fold = Fold256;
    MOE_ALWAYS_INLINE static __m256i total8(const __m256i *x) { return transpose_sum8(x); }
};

// --- float rows ----------------------------------------------------------------------

struct FloatPrep {
    const uint8_t *act;
};

template <FloatKind K>
struct FloatRows {
    using Prep = FloatPrep;
    static constexpr int64_t kBlockElems = 1;
    static size_t prep_bytes(int64_t) { return 0; }
    static Prep prepare(const uint8_t *act, int64_t, uint8_t *) { return {act}; }

    // Lane i % 32 += w_i * a_i (fused): four 8-lane accumulators per token.
    template <int T>
    static void row(const uint8_t *w, const Prep *p, int64_t n, float *out) {
        constexpr size_t e = kElemBytes<K>;
        __m256 acc[T][4];
        for (int t = 0; t < T; ++t)
            for (int k = 0; k < 4; ++k) acc[t][k] = _mm256_setzero_ps();
        int64_t i = 0;
        for (; i + 32 <= n; i += 32)
            for (int k = 0; k < 4; ++k) {
                const __m256 wv = load8<K>(w + (i + 8 * k) * e);
                for (int t = 0; t < T; ++t)
                    acc[t][k] = _mm256_fmadd_ps(wv, load8<K>(p[t].act + (i + 8 * k) * e), acc[t][k]);
            }
        for (int t = 0; t < T; ++t) {
            alignas(32) float lanes[32];
            for (int k = 0; k < 4; ++k) _mm256_store_ps(lanes + 8 * k, acc[t][k]);
            out[t] = finish_float_lanes<K>(lanes, i, n, w, p[t].act);
        }
    }
};

}  // namespace
}  // namespace moe::kernels::detail
