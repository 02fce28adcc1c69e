#include "model/attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "kernels/fp_convert.hpp"
#include "kernels/kernels.hpp"
#include "model/vec8.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace moe {
namespace {

// The side of the blocks store_transposed turns a key tile in: eight keys by
// eight of their elements (an F8's lanes; the wide path turns two blocks of
// keys at once, one per half of an F8x2). The tiled path takes key sizes that
// are multiples of it.
constexpr int32_t kBlock = 8;
// Largest head dimension served by the tiled path (larger ones use
// attend_head): the 576-wide keys of latent attention (512 latent + 64
// rotary elements) included.
constexpr int32_t kMaxHeadDim = 576;
// Most query heads per KV head served by the tiled path.
constexpr int32_t kMaxGroup = 256;

// f16 cache rows are converted by F16C whenever the kernels run a SIMD ISA
// (the kernels' AVX2 level requires F16C, and AVX-512 requires AVX2), so
// holding them to the scalar ISA (MOESTREAM_ISA=scalar, set_isa) also lets
// tests run the portable conversion on x86. Both conversions are exact.
bool use_f16c() {
#if defined(__x86_64__)
    return kernels::active_isa() != kernels::Isa::scalar;
#else
    return false;
#endif
}

using vec8::exp8_nonpositive;
using vec8::exp_nonpositive;
using vec8::F8;
using vec8::F8x2;
using vec8::kLanes;
using vec8::kLanesOf;
using vec8::load8;
using vec8::load_lanes;
using vec8::store8;
using vec8::store_lanes;

// The wide path: 16 positions a tile, sums of 16 lanes (F8x2), values
// converted 16 elements at a time. Only where the kernels run AVX-512, whose
// clone holds an F8x2 in one of 32 registers; elsewhere the sums of 8 lanes
// fit the 16 registers. Either way every sum is the same sequence of float
// operations, so the choice changes the speed only. Builds without clones
// (clang) compile attend_tiled for the baseline ISA, where a 16-lane sum takes
// four SSE registers (64 for the sums of 16 heads), so they keep the 8-lane
// path unless they target AVX-512 anyway; the sanitizer builds take the wide
// path regardless, so their tests cover it. The kernels' AVX-512 level implies
// F16C (use_f16c), so the wide path converts f16 rows with F16C only.
bool use_wide() {
#if defined(__x86_64__) && \
    (defined(MOE_VEC8_AVX512_CLONE) || defined(__AVX512F__) || defined(MOESTREAM_NO_TARGET_CLONES))
    return kernels::active_isa() == kernels::Isa::avx512;
#else
    return false;
#endif
}

// Eight or sixteen elements (V's lanes) of a cache row from element i on, as
// f32: one loader per cache type, so the key and value loops below are
// written once. (The result is an out parameter: a vector returned across
// targets would change the ABI.)
struct F32Row {
    template <class V>
    static MOE_VEC8_INLINE void load(const uint8_t *row, int32_t i, V &out) {
        std::memcpy(&out, row + 4 * size_t(i), sizeof out);
    }
};
struct HalfRow {  // any CPU: the scalar conversion
    template <class V>
    static MOE_VEC8_INLINE void load(const uint8_t *row, int32_t i, V &out) {
        alignas(64) float f[kLanesOf<V>];
        for (int32_t l = 0; l < kLanesOf<V>; ++l) f[l] = kernels::detail::load_half(row + 2 * size_t(i + l));
        out = load_lanes<V>(f);
    }
};
#if defined(__x86_64__)
// The hardware conversion, exact as half_to_f32 is (signalling NaNs come out
// quiet). Only for functions of the same target, which inline it (flatten):
// the clones' baselines do not include F16C.
struct HalfRowF16c {
    __attribute__((target("avx,f16c"))) static inline void load(const uint8_t *row, int32_t i, F8 &out) {
        out = F8(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(row + 2 * size_t(i)))));
    }
};
// Sixteen elements in one conversion too, for AVX-512 functions.
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's _mm512_cvtph_ps starts from a deliberately undefined register and warns about it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
struct HalfRowF16cWide : HalfRowF16c {
    using HalfRowF16c::load;
    __attribute__((target("avx512f,f16c"))) static inline void load(const uint8_t *row, int32_t i, F8x2 &out) {
        out = F8x2(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(row + 2 * size_t(i)))));
    }
    // Elements i .. i + 7 of row a in lanes 0-7, of row b in lanes 8-15: one conversion.
    __attribute__((target("avx512f,f16c"))) static inline void load_pair(const uint8_t *a, const uint8_t *b,
                                                                         int32_t i, F8x2 &out) {
        const __m128i ha = _mm_loadu_si128(reinterpret_cast<const __m128i *>(a + 2 * size_t(i)));
        const __m128i hb = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b + 2 * size_t(i)));
        out = F8x2(_mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(ha), hb, 1)));
    }
};
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

// Lane q of a shuffle of two V (W lanes each) that takes, in each eight-lane
// half, lane `pick` of the same half of the first V (pick 0-7) or of the
// second (8-15).
template <int32_t W>
constexpr int half_lane(int pick, size_t q) {
    return pick % kLanes + int(q / kLanes) * kLanes + (pick >= kLanes ? W : 0);
}
template <int... kPick, class V, size_t... q>
MOE_VEC8_INLINE V shuffle_halves(const V &a, const V &b, std::index_sequence<q...>) {
    constexpr int pick[] = {kPick...};
    return __builtin_shufflevector(a, b, half_lane<kLanesOf<V>>(pick[q % kLanes], q)...);
}
// The shuffle of a and b whose lane p of each eight-lane half is lane
// kPick[p] of that half of a (0-7) or b (8-15): one recipe for an F8 and
// for both halves of an F8x2.
template <int... kPick, class V>
MOE_VEC8_INLINE V shuffle_halves(const V &a, const V &b) {
    static_assert(sizeof...(kPick) == kLanes);
    return shuffle_halves<kPick...>(a, b, std::make_index_sequence<kLanesOf<V>>{});
}

// Elements i .. i + 7 of eight keys, r[l] holding key l's, stored as tile
// rows i .. i + 7 (row i + j, width floats after row i + j - 1, holds element
// i + j of key l in lane l): pairs, then quads of keys interleaved within
// 128-bit halves, then the halves swapped across (unpack, shuffle and 128-bit
// permutes on AVX), so the tile takes eight stores instead of 64 scalar moves.
// With V = F8x2 the same steps transpose sixteen keys at once: r[l] holds key
// l in lanes 0-7 and key l + 8 in lanes 8-15, each half shuffled as an F8 is
// (shuffle_halves), and row i + j comes out with keys 0-7 then 8-15.
template <class V>
MOE_VEC8_INLINE void store_transposed(const V *r, float *tile, int32_t width) {
    V t[kBlock], u[kBlock];
    for (int k = 0; k < kBlock; k += 2) {
        t[k] = shuffle_halves<0, 8, 1, 9, 4, 12, 5, 13>(r[k], r[k + 1]);       // elements 0 1 | 4 5
        t[k + 1] = shuffle_halves<2, 10, 3, 11, 6, 14, 7, 15>(r[k], r[k + 1]);  // elements 2 3 | 6 7
    }
    for (int k = 0; k < kBlock; k += 4) {
        for (int j = 0; j < 2; ++j) {
            const V &a = t[k + j], &b = t[k + 2 + j];
            u[k + 2 * j] = shuffle_halves<0, 1, 8, 9, 4, 5, 12, 13>(a, b);
            u[k + 2 * j + 1] = shuffle_halves<2, 3, 10, 11, 6, 7, 14, 15>(a, b);
        }
    }
    // u[j] (keys 0-3) and u[4 + j] (keys 4-7) hold elements j and 4 + j.
    for (int j = 0; j < 4; ++j) {
        const V &a = u[j], &b = u[4 + j];
        store_lanes(tile + j * width, shuffle_halves<0, 1, 2, 3, 8, 9, 10, 11>(a, b));
        store_lanes(tile + (4 + j) * width, shuffle_halves<4, 5, 6, 7, 12, 13, 14, 15>(a, b));
    }
}

// Elements i .. i + 7 of key l as an F8, or as an F8x2 with those of key
// l + 8 in lanes 8-15 (by one conversion where the row type can).
template <class Row, class V>
MOE_VEC8_INLINE void load_key(const uint8_t *const *k, int l, int32_t i, V &out) {
    if constexpr (kLanesOf<V> == kLanes) {
        Row::load(k[l], i, out);
    } else if constexpr (requires { Row::load_pair(k[l], k[l + kBlock], i, out); }) {
        Row::load_pair(k[l], k[l + kBlock], i, out);
    } else {
        F8 a, b;
        Row::load(k[l], i, a);
        Row::load(k[l + kBlock], i, b);
        out = __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    }
}

// The tile score_tile reads, from the cache rows of as many keys as V has
// lanes (key l's elements from k[l] on): eight elements of each key loaded
// (widened) as vectors, transposed in registers.
template <class Row, class V>
MOE_VEC8_INLINE void fill_key_tile(const uint8_t *const *k, int32_t dk, float *tile) {
    constexpr int32_t W = kLanesOf<V>;
    for (int32_t i = 0; i < dk; i += kBlock) {
        V r[kBlock];
        for (int l = 0; l < kBlock; ++l) load_key<Row>(k, l, i, r[l]);
        store_transposed(r, tile + size_t(i) * W, W);
    }
}

// Softmax of n scores in place, shared by attend_head and the tiled path so
// both give the same bits: weights V's lanes (8 or 16) at a time, their sum
// in eight double lanes (lane i taking positions i, i + 8, i + 16, ... in
// order whatever V is) combined in a fixed order (one running sum would be a
// chain of dependent additions as long as the context). A sink joins the
// maximum and adds its weight to the sum last.
template <class V = F8>
MOE_VEC8_INLINE void softmax_in_place(float *s, int32_t n, const float *sink) {
    constexpr int32_t W = kLanesOf<V>;
    float max = sink ? *sink : -INFINITY;
    int32_t j = 0;
    if (n >= W) {
        // W maxima side by side (one serial chain through the context would
        // take a compare's latency per score), each keeping the first of
        // equal or NaN scores as std::max does. The maximum comes out the
        // same, but for the sign of a zero, which no weight depends on
        // (x - 0 and x - -0 differ only at x = -0, where both weights are 1).
        V m = V{} + max;
        for (; j + W <= n; j += W) {
            const V x = load_lanes<V>(s + j);
            m = m < x ? x : m;
        }
        for (int i = 0; i < W; ++i) max = std::max(max, m[i]);
    }
    for (; j < n; ++j) max = std::max(max, s[j]);
    // The eight sums as one vector: written lane by lane, GCC may convert and
    // add one lane at a time.
    using D8 = double __attribute__((vector_size(64)));
    D8 lanes = {};
    j = 0;
    if constexpr (W > kLanes) {
        static_assert(W == 2 * kLanes);
        for (; j + W <= n; j += W) {
            const V e = exp_nonpositive(load_lanes<V>(s + j) - max);
            store_lanes(s + j, e);
            lanes += __builtin_convertvector(__builtin_shufflevector(e, e, 0, 1, 2, 3, 4, 5, 6, 7), D8);
            lanes += __builtin_convertvector(__builtin_shufflevector(e, e, 8, 9, 10, 11, 12, 13, 14, 15), D8);
        }
    }
    for (; j + kLanes <= n; j += kLanes) {
        const F8 e = exp8_nonpositive(load8(s + j) - max);
        store8(s + j, e);
        lanes += __builtin_convertvector(e, D8);
    }
    if (j < n) {
        alignas(32) float tail[kLanes] = {};
        for (int32_t i = 0; i < n - j; ++i) tail[i] = s[j + i] - max;
        const F8 e = exp8_nonpositive(load8(tail));
        for (int32_t i = 0; i < n - j; ++i) {
            s[j + i] = e[i];
            lanes[i] += double(e[i]);
        }
    }
    double sum = ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
    if (sink) sum += double(exp8_nonpositive(F8{} + (*sink - max))[0]);
    const float inv = float(1.0 / sum);
    j = 0;
    for (; j + W <= n; j += W) store_lanes(s + j, load_lanes<V>(s + j) * inv);
    for (; j < n; ++j) s[j] = s[j] * inv;
}

// Scores of H query heads (dk apart in q) against as many keys as V has
// lanes, transposed in tile (tile[i * W + l] = element i of key l, W lanes):
// one running sum per (head, key), element after element, so H * W
// independent sums overlap and each query element loaded serves W keys.
template <int H, class V>
MOE_VEC8_INLINE void score_tile(const float *q, int32_t dk, const float *tile, float scale, float *scores,
                                size_t stride) {
    constexpr int32_t W = kLanesOf<V>;
    V acc[H];
    for (int h = 0; h < H; ++h) acc[h] = V{};
    for (int32_t i = 0; i < dk; ++i) {
        const V t = load_lanes<V>(tile + size_t(i) * W);
        for (int h = 0; h < H; ++h) acc[h] += q[size_t(h) * size_t(dk) + size_t(i)] * t;
    }
    for (int h = 0; h < H; ++h) store_lanes(scores + size_t(h) * stride, acc[h] * scale);
}

template <int H, class V>
MOE_VEC8_INLINE int32_t score_heads(int32_t g, int32_t group, const float *q, int32_t dk, const float *tile,
                                    float scale, float *scores, size_t stride) {
    for (; g + H <= group; g += H)
        score_tile<H, V>(q + size_t(g) * size_t(dk), dk, tile, scale, scores + size_t(g) * stride, stride);
    return g;
}

// Every head of the group against one tile of kLanesOf<V> keys: as many heads
// at a time as registers hold (the AVX-512 clone's 32 take 16 wide sums, the
// 16 of AVX2 eight narrow ones), then halving.
template <class V>
MOE_VEC8_INLINE void score_group(int32_t group, const float *q, int32_t dk, const float *tile, float scale,
                                 float *scores, size_t stride) {
    int32_t g = 0;
    if constexpr (kLanesOf<V> > kLanes) g = score_heads<16, V>(g, group, q, dk, tile, scale, scores, stride);
    g = score_heads<8, V>(g, group, q, dk, tile, scale, scores, stride);
    g = score_heads<4, V>(g, group, q, dk, tile, scale, scores, stride);
    g = score_heads<2, V>(g, group, q, dk, tile, scale, scores, stride);
    score_heads<1, V>(g, group, q, dk, tile, scale, scores, stride);
}

// out[g] (dv floats, dv apart) += w[g][l] * value row l (w's rows stride
// apart) for G heads and l = 0 .. n - 1, in that order per element, C * W
// elements at a time (W = V's lanes) from element c on; returns where it
// stopped. Each W elements of a row are loaded (widened) once for the G
// heads: G * C sums in registers take C + G loads per row, not 2 * G * C.
template <class Row, class V, int G, int C>
MOE_VEC8_INLINE int32_t accumulate_heads(const uint8_t *const *v, int32_t n, int32_t dv, const float *w,
                                         size_t stride, float *out, int32_t c) {
    constexpr int32_t W = kLanesOf<V>;
    for (; c + C * W <= dv; c += C * W) {
        V o[G][C];
        for (int g = 0; g < G; ++g)
            for (int k = 0; k < C; ++k) o[g][k] = load_lanes<V>(out + size_t(g) * size_t(dv) + size_t(c + k * W));
        for (int32_t l = 0; l < n; ++l) {
            V x[C];
            for (int k = 0; k < C; ++k) Row::load(v[l], c + k * W, x[k]);
            for (int g = 0; g < G; ++g) {
                const float a = w[size_t(g) * stride + size_t(l)];
                for (int k = 0; k < C; ++k) o[g][k] += a * x[k];
            }
        }
        for (int g = 0; g < G; ++g)
            for (int k = 0; k < C; ++k) store_lanes(out + size_t(g) * size_t(dv) + size_t(c + k * W), o[g][k]);
    }
    return c;
}

// G heads over every element: C * W at a time, then W, then on the wide
// path 8 (dv is a multiple of 8).
template <class Row, class V, int G, int C>
MOE_VEC8_INLINE void accumulate_head_block(const uint8_t *const *v, int32_t n, int32_t dv, const float *w,
                                           size_t stride, float *out) {
    int32_t c = accumulate_heads<Row, V, G, C>(v, n, dv, w, stride, out, 0);
    c = accumulate_heads<Row, V, G, 1>(v, n, dv, w, stride, out, c);
    if constexpr (kLanesOf<V> > kLanes) accumulate_heads<Row, F8, G, 1>(v, n, dv, w, stride, out, c);
}

// Every head of the group, as many at a time as the registers hold. 16
// lanes (AVX-512's 32 registers): eight heads over 32 elements (16 sums, 18
// registers; every element of a row converted once when the group has eight
// heads), then four over 32, then one over 128. 8 lanes (16 registers): four
// heads over 16 elements (6 loads a row for 8 sums), then one over 64 (9
// loads for 8 sums).
template <class Row, class V>
MOE_VEC8_INLINE void accumulate_values(const uint8_t *const *v, int32_t n, int32_t dv, int32_t group,
                                       const float *w, size_t stride, float *out) {
    int32_t g = 0;
    if constexpr (kLanesOf<V> > kLanes) {
        for (; g + 8 <= group; g += 8)
            accumulate_head_block<Row, V, 8, 2>(v, n, dv, w + size_t(g) * stride, stride, out + size_t(g) * size_t(dv));
    }
    for (; g + 4 <= group; g += 4)
        accumulate_head_block<Row, V, 4, 2>(v, n, dv, w + size_t(g) * stride, stride, out + size_t(g) * size_t(dv));
    for (; g < group; ++g)
        accumulate_head_block<Row, V, 1, 8>(v, n, dv, w + size_t(g) * stride, stride, out + size_t(g) * size_t(dv));
}

// How a call reads its cache rows: f32 as they are, f16 by F16C or by the
// portable conversion (see use_f16c).
enum class RowKind { f32, f16c, half };

// The two loops that read cache rows, each as a call of its Row (loader) and
// V (tile width) for run_by_row_kind to pick.
struct KeyTileLoop {  // fill_key_tile
    const uint8_t *const *k;
    int32_t dk;
    float *tile;
    template <class Row, class V>
    MOE_VEC8_INLINE void run() const {
        fill_key_tile<Row, V>(k, dk, tile);
    }
};
struct ValueLoop {  // accumulate_values
    const uint8_t *const *v;
    int32_t n, dv, group;
    const float *w;
    size_t stride;
    float *out;
    template <class Row, class V>
    MOE_VEC8_INLINE void run() const {
        accumulate_values<Row, V>(v, n, dv, group, w, stride, out);
    }
};

// A loop on f16 rows with F16C, per tile width: a function of that target,
// as HalfRowF16c needs.
template <class V, class Loop>
struct F16cLoop {  // never called where there is no F16C: use_f16c() is false
    static void run(const Loop &) {}
};
#if defined(__x86_64__)
template <class Loop>
struct F16cLoop<F8, Loop> {
    __attribute__((target("avx,f16c"), flatten)) static void run(const Loop &loop) {
        loop.template run<HalfRowF16c, F8>();
    }
};
template <class Loop>
struct F16cLoop<F8x2, Loop> {
    __attribute__((target("avx512f,f16c"), flatten)) static void run(const Loop &loop) {
        loop.template run<HalfRowF16cWide, F8x2>();
    }
};
#endif

// A loop with the row loader of its row kind. The wide path runs only where
// F16C is in use (use_wide), so it never converts f16 rows portably.
template <class V, class Loop>
MOE_VEC8_INLINE void run_by_row_kind(RowKind kind, const Loop &loop) {
    if (kind == RowKind::f32) {
        loop.template run<F32Row, V>();
    } else if (kind == RowKind::f16c || kLanesOf<V> > kLanes) {
        F16cLoop<V, Loop>::run(loop);
    } else if constexpr (kLanesOf<V> == kLanes) {
        loop.template run<HalfRow, V>();
    }
}

// Asks for the cache lines of rows p .. p + count - 1 (those before n), bytes
// from offset in each. The loops below read 8 or 16 rows side by side, a few
// lines of each, which the hardware prefetchers barely follow; in a decode
// the rows come from memory (every layer's cache together outgrows the CPU's
// caches), so rows kAhead ahead of those computed are asked for (the tile two
// ahead, or the next wide one).
constexpr int32_t kAhead = 16;
MOE_VEC8_INLINE void prefetch_rows(const KvRowRun &run, int32_t p, int32_t count, int32_t n, size_t offset,
                                   size_t bytes) {
    constexpr size_t kLine = 64;
    for (int32_t l = p; l < std::min(p + count, n); ++l)
        for (size_t b = 0; b < bytes; b += kLine) __builtin_prefetch(run.row(l) + offset + b);
}

// Points rows[0 .. W - 1] at the KV head (its bytes from byte head on) in the
// rows of positions p .. p + W - 1, the last position's row repeated past
// n_pos, and asks for the rows kAhead further on; returns how many of the W
// positions come before n_pos.
template <int32_t W>
MOE_VEC8_INLINE int32_t tile_rows(const KvRowRun &run, int32_t p, int32_t n_pos, size_t head, size_t bytes,
                                  const uint8_t **rows) {
    const int32_t n = std::min(W, n_pos - p);
    prefetch_rows(run, p + kAhead, W, n_pos, head, bytes);
    for (int32_t l = 0; l < W; ++l) rows[l] = run.row(p + std::min(l, n - 1)) + head;
    return n;
}

// One call of attend_tiled: the group's queries, its rows in the cache
// (positions numbered from 0, row p of a run holding position first + p, also
// where a sliding window's ring wraps), its scores (n_pos per head, head
// after head) and outputs.
struct TiledCall {
    int32_t group, dk, dv, n_pos;
    RowKind kind;
    KvRowRun keys, values;
    size_t k_head, v_head;  // the KV head's first byte in a row
    const float *q;
    float scale;
    float *scores;
    float *out;

    // The KV head's bytes in a key row and in a value row.
    size_t k_bytes() const { return size_t(dk) * element_bytes(); }
    size_t v_bytes() const { return size_t(dv) * element_bytes(); }
    // The cache's: kind is RowKind::f32 exactly when the cache holds floats.
    size_t element_bytes() const { return KvCache::element_bytes_of(kind == RowKind::f32); }
};

// Every value row into every head's output, as many rows at a time as V has
// lanes, each row accumulated into the heads in position order.
template <class V>
MOE_VEC8_INLINE void accumulate_tiles(const TiledCall &c) {
    constexpr int32_t W = kLanesOf<V>;
    const uint8_t *v[W];
    for (int32_t j0 = 0; j0 < c.n_pos; j0 += W) {
        const int32_t n = tile_rows<W>(c.values, j0, c.n_pos, c.v_head, c.v_bytes(), v);
        run_by_row_kind<V>(c.kind, ValueLoop{v, n, c.dv, c.group, c.scores + size_t(j0), size_t(c.n_pos), c.out});
    }
}

// Scores of every head of the group against every key, a tile of as many
// keys as V has lanes at a time. Past the last key a tile repeats it: each
// lane's sum is still a whole tile's (so attend_head's), and those of the
// repeats are dropped.
template <class V>
MOE_VEC8_INLINE void score_keys(const TiledCall &c) {
    constexpr int32_t W = kLanesOf<V>;
    alignas(64) float tile[kMaxHeadDim * W];
    // The scores of a last tile that is not whole: its lanes past the last key
    // would run into the next head's scores.
    alignas(64) float last[kMaxGroup * W];
    const uint8_t *k[W];
    for (int32_t p = 0; p < c.n_pos; p += W) {
        const int32_t n = tile_rows<W>(c.keys, p, c.n_pos, c.k_head, c.k_bytes(), k);
        run_by_row_kind<V>(c.kind, KeyTileLoop{k, c.dk, tile});
        const bool whole = n == W;
        score_group<V>(c.group, c.q, c.dk, tile, c.scale, whole ? c.scores + p : last, whole ? size_t(c.n_pos) : W);
        for (int32_t g = 0; !whole && g < c.group; ++g)
            std::memcpy(c.scores + size_t(g) * size_t(c.n_pos) + size_t(p), last + size_t(g) * W,
                        size_t(n) * sizeof(float));
    }
}

// attend_tiled on tiles of as many positions as V has lanes (8, or 16 on the
// wide path): keys scored a tile at a time for all heads of the group,
// softmax per head, as attend_head, values accumulated as many positions at
// a time.
template <class V>
MOE_VEC8_INLINE void attend_tiles(const TiledCall &c, const float *sinks) {
    score_keys<V>(c);
    for (int32_t g = 0; g < c.group; ++g) {
        softmax_in_place<V>(c.scores + size_t(g) * size_t(c.n_pos), c.n_pos, sinks ? sinks + g : nullptr);
        std::fill(c.out + size_t(g) * size_t(c.dv), c.out + size_t(g + 1) * size_t(c.dv), 0.0f);
    }
    accumulate_tiles<V>(c);
}

// attend_kv_group over positions first .. end - 1, for the head sizes and
// groups it passes here, on the wide path or the 8-position one.
MOE_VEC8_CLONES void attend_tiled(const KvCache &kv, int32_t layer, const AttentionShape &s, int32_t kv_head,
                                  const float *q, int32_t first, int32_t end, float *scores, float *out,
                                  const float *sinks) {
    const int32_t dk = s.head_dim_k, dv = s.head_dim_v, n_pos = end - first;
    const size_t es = kv.element_bytes();
    const size_t k_head = size_t(kv_head) * size_t(dk) * es;
    const TiledCall c{.group = s.n_head / s.n_head_kv,
                      .dk = dk,
                      .dv = dv,
                      .n_pos = n_pos,
                      .kind = kv.is_f32() ? RowKind::f32 : use_f16c() ? RowKind::f16c : RowKind::half,
                      .keys = kv.run(KvPart::k, layer, first),
                      .values = kv.run(KvPart::v, layer, first),
                      .k_head = k_head,
                      .v_head = kv.values_in_keys() ? k_head : size_t(kv_head) * size_t(dv) * es,
                      .q = q,
                      .scale = s.scale,
                      .scores = scores,
                      .out = out};
    if (use_wide()) attend_tiles<F8x2>(c, sinks);
    else attend_tiles<F8>(c, sinks);
}

}  // namespace

void attend_head(const KvCache &kv, int32_t layer, const AttentionShape &s, int32_t head, const float *q,
                 int32_t pos, float *scores, float *out, const AttentionSpan &span) {
    const int32_t kv_head = head / (s.n_head / s.n_head_kv);
    const int32_t k_off = kv_head * s.head_dim_k;
    const int32_t v_off = kv.values_in_keys() ? k_off : kv_head * s.head_dim_v;
    const int32_t first = span.first;
    for (int32_t j = first; j <= pos; ++j) scores[j - first] = kv.dot_k(layer, j, k_off, s.head_dim_k, q) * s.scale;
    softmax_in_place(scores, pos + 1 - first, span.sinks);
    std::fill(out, out + s.head_dim_v, 0.0f);
    for (int32_t j = first; j <= pos; ++j) kv.axpy_v(layer, j, v_off, s.head_dim_v, scores[j - first], out);
}

float softmax_exp(float x) {
    F8 v = F8{} + x;
    return exp8_nonpositive(v)[0];
}

void attend_kv_group(const KvCache &kv, int32_t layer, const AttentionShape &s, int32_t kv_head, const float *q,
                     int32_t pos, float *scores, float *out, const AttentionSpan &span) {
    const int32_t group = s.n_head / s.n_head_kv;
    const int32_t dk = s.head_dim_k, dv = s.head_dim_v;
    if (dk > kMaxHeadDim || dv > kMaxHeadDim || group > kMaxGroup || dk % kBlock != 0 || dv % kLanes != 0) {
        for (int32_t g = 0; g < group; ++g)
            attend_head(kv, layer, s, kv_head * group + g, q + size_t(g) * size_t(dk), pos,
                        scores + size_t(g) * size_t(pos + 1), out + size_t(g) * size_t(dv),
                        AttentionSpan{span.first, span.sinks ? span.sinks + g : nullptr});
        return;
    }
    attend_tiled(kv, layer, s, kv_head, q, span.first, pos + 1, scores, out, span.sinks);
}

}  // namespace moe
