// AVX2 building blocks, included only by the per-ISA kernel files (which are
// compiled with at least AVX2 + FMA + F16C). Internal linkage on purpose.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/blocks.hpp"

// Hot helpers must be inlined into the row loops (a call would pass vectors
// through memory).
#define MOE_ALWAYS_INLINE inline __attribute__((always_inline))

namespace moe::kernels::detail::avx2 {
namespace {

// 32 bytes from any address (quants, activations, scale words).
MOE_ALWAYS_INLINE __m256i load256(const void *p) { return _mm256_loadu_si256(static_cast<const __m256i *>(p)); }

// 16 bytes of nibbles -> 32 bytes: low nibbles of bytes 0..15, then high nibbles.
MOE_ALWAYS_INLINE __m256i nibbles32(const uint8_t *p) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p));
    const __m256i both = _mm256_setr_m128i(q, _mm_srli_epi16(q, 4));
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// Bit j of the little-endian 32-bit word at p -> byte j set to `value` (or 0).
MOE_ALWAYS_INLINE __m256i high_bits32(const uint8_t *p, char value) {
    uint32_t bits;
    std::memcpy(&bits, p, 4);
    // Byte j takes word byte j/8, then tests bit j%8.
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(static_cast<int>(bits)),
        _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
    const __m256i select = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
    return _mm256_and_si256(set, _mm256_set1_epi8(value));
}

// 32 unsigned (<= 127 after pairing) x 32 signed bytes -> 8 int32 partial sums.
MOE_ALWAYS_INLINE __m256i dot_u8_i8(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
// 32 signed x 32 signed bytes (b never -128) -> 8 int32 partial sums.
MOE_ALWAYS_INLINE __m256i dot_i8_signed(__m256i w, __m256i a) {
    return dot_u8_i8(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
}

MOE_ALWAYS_INLINE int32_t hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

// A network that sums eight vectors of int32 partial sums into one vector
// whose lane j is the total of vector j, in three levels: N::pair joins two
// vectors, N::quad two pairs, N::total the two quads into 8 lanes (N::V the
// vector type). Fold<N> runs it on a group's partial sums as they are
// produced (the K-quant row loop's D::Fold): add<J>(s) takes block J's
// partials, one level per pair of blocks, so at most three vectors stay live;
// sum8<N> runs it on eight vectors at hand.
template <typename N>
struct Fold {
    using V = typename N::V;
    V even, pair, quad[2];
    template <int J>
    MOE_ALWAYS_INLINE void add(V s) {
        if constexpr (J % 2 == 0) {
            even = s;
        } else {
            const V pr = N::pair(even, s);
            if constexpr (J % 4 == 1) pair = pr;
            else quad[J / 4] = N::quad(pair, pr);
        }
    }
    // Lane j = the total of block j.
    MOE_ALWAYS_INLINE __m256i total() const { return N::total(quad[0], quad[1]); }
    // After blocks 0..3 alone: each 128-bit lane holds the totals of that lane of blocks 0..3.
    MOE_ALWAYS_INLINE V lane_totals4() const { return quad[0]; }
};
template <typename N>
MOE_ALWAYS_INLINE __m256i sum8(const typename N::V *s) {
    Fold<N> f;
    f.template add<0>(s[0]);
    f.template add<1>(s[1]);
    f.template add<2>(s[2]);
    f.template add<3>(s[3]);
    f.template add<4>(s[4]);
    f.template add<5>(s[5]);
    f.template add<6>(s[6]);
    f.template add<7>(s[7]);
    return f.total();
}

// The 256-bit network: two levels of unpacks whose halves are added (per
// 128-bit lane the totals of the quad's four vectors, in order, as two
// vphaddd give them, which cost several times as much on Zen 4), then the
// two quads' 128-bit lanes added.
struct Sum256 {
    using V = __m256i;
    // Per lane: a's dwords 0 + 2 and b's, then a's dwords 1 + 3 and b's.
    MOE_ALWAYS_INLINE static __m256i pair(__m256i a, __m256i b) {
        return _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
    }
    // Per lane: the totals of the four vectors of pairs x and y.
    MOE_ALWAYS_INLINE static __m256i quad(__m256i x, __m256i y) {
        return _mm256_add_epi32(_mm256_unpacklo_epi64(x, y), _mm256_unpackhi_epi64(x, y));
    }
    MOE_ALWAYS_INLINE static __m256i total(__m256i q0, __m256i q1) {
        return _mm256_add_epi32(_mm256_permute2x128_si256(q0, q1, 0x20), _mm256_permute2x128_si256(q0, q1, 0x31));
    }
};
using Fold256 = Fold<Sum256>;

// Eight vectors of partial sums -> one vector whose lane j is the total of s[j].
MOE_ALWAYS_INLINE __m256i transpose_sum8(const __m256i *s) { return sum8<Sum256>(s); }

MOE_ALWAYS_INLINE __m256 load8_f16(const uint8_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
}
MOE_ALWAYS_INLINE __m256 load8_bf16(const uint8_t *p) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

// The heads of two Q4_K/Q5_K super-blocks (d, dmin, 12 scale bytes), one
// per 128-bit lane of x, decoded in their lanes: bytes 0..7 = the six-bit
// scales, 8..15 = the mins (the values k_scale_min gives).
MOE_ALWAYS_INLINE __m256i k_scales_mins2(__m256i x) {
    // Scale byte i is x byte 4 + i.
    const __m256i a = _mm256_shuffle_epi8(
        x, _mm256_broadcastsi128_si256(_mm_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15)));
    const __m256i b = _mm256_shuffle_epi8(
        x, _mm256_broadcastsi128_si256(_mm_setr_epi8(-1, -1, -1, -1, 4, 5, 6, 7, -1, -1, -1, -1, 8, 9, 10, 11)));
    const __m256i low = _mm256_and_si256(_mm256_blend_epi16(a, _mm256_srli_epi16(a, 4), 0xC0),
                                         _mm256_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f,
                                                           0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
    return _mm256_or_si256(low, _mm256_and_si256(_mm256_srli_epi16(b, 2), _mm256_set1_epi8(0x30)));
}

// The head of one Q4_K/Q5_K super-block from one 16-byte load: returns
// k_scales_mins2's bytes and the fp16 pair d | dmin << 16 in dm.
MOE_ALWAYS_INLINE __m128i k_head(const uint8_t *blk, uint32_t &dm) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i *>(blk));
    dm = static_cast<uint32_t>(_mm_cvtsi128_si32(x));
    return _mm256_castsi256_si128(k_scales_mins2(_mm256_castsi128_si256(x)));
}

enum class FloatKind { f32, f16, bf16 };
template <FloatKind K>
constexpr size_t kElemBytes = K == FloatKind::f32 ? 4 : 2;

template <FloatKind K>
MOE_ALWAYS_INLINE __m256 load8(const uint8_t *p) {
    if constexpr (K == FloatKind::f32) return _mm256_loadu_ps(reinterpret_cast<const float *>(p));
    else if constexpr (K == FloatKind::f16) return load8_f16(p);
    else return load8_bf16(p);
}

// Finishes a float dot: elements [i, n) go to lane (index % 32) with a fused
// multiply-add, then the canonical 32-lane reduction.
template <FloatKind K>
MOE_ALWAYS_INLINE float finish_float_lanes(float *lanes, int64_t i, int64_t n, const uint8_t *w, const uint8_t *a) {
    for (; i < n; ++i) {
        float wv, av;
        if constexpr (K == FloatKind::f32) {
            wv = load_f32(w + 4 * i);
            av = load_f32(a + 4 * i);
        } else if constexpr (K == FloatKind::bf16) {
            wv = bf16_to_f32_inline(load_u16(w + 2 * i));
            av = bf16_to_f32_inline(load_u16(a + 2 * i));
        } else {
            wv = load_half(w + 2 * i);
            av = load_half(a + 2 * i);
        }
        lanes[i & 31] = std::fma(wv, av, lanes[i & 31]);
    }
    return FmaLanes::reduce32(lanes);
}

}  // namespace
}  // namespace moe::kernels::detail::avx2
