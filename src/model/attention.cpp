#include "model/attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/fp_convert.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace moe {
namespace {

// Positions dotted together: independent sums the CPU can overlap (one
// sequential sum per key keeps the result equal to attend_head's).
constexpr int32_t kTile = 8;
// Largest head dimension served by the tiled path (larger ones use attend_head).
constexpr int32_t kMaxHeadDim = 256;
// Most query heads per KV head served by the tiled path.
constexpr int32_t kMaxGroup = 256;

void widen_half(const uint8_t *p, int32_t from, int32_t n, float *out) {
    for (int32_t i = from; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * size_t(i), 2);
        out[i] = kernels::detail::half_to_f32(h);
    }
}

#if defined(__x86_64__)
// The hardware conversion is exact, as half_to_f32 (signalling NaNs come out quiet).
__attribute__((target("avx,f16c"))) void widen_half_f16c(const uint8_t *p, int32_t n, float *out) {
    int32_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 2 * size_t(i)))));
    widen_half(p, i, n, out);
}
// CPUID leaf 1: ECX bit 27 OSXSAVE, 28 AVX, 29 F16C; XCR0 bits 1-2 say the OS
// saves the YMM state. (cpuid rather than __builtin_cpu_supports: clang 14 does
// not know "f16c".)
bool cpu_has_f16c() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    const unsigned need = (1u << 27) | (1u << 28) | (1u << 29);
    if ((c & need) != need) return false;
    unsigned lo = 0, hi = 0;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 6u) == 6u;
}
const bool kHasF16c = cpu_has_f16c();
#endif

// Widens n cache elements (f16 or f32) starting at p to f32.
void widen(const uint8_t *p, bool f32, int32_t n, float *out) {
    if (f32) {
        std::memcpy(out, p, size_t(n) * sizeof(float));
        return;
    }
#if defined(__x86_64__)
    if (kHasF16c) return widen_half_f16c(p, n, out);
#endif
    widen_half(p, 0, n, out);
}

}  // namespace

void attend_head(const KvCache &kv, int32_t layer, const AttentionShape &s, int32_t head, const float *q,
                 int32_t pos, float *scores, float *out) {
    const int32_t kv_head = head / (s.n_head / s.n_head_kv);
    const int32_t k_off = kv_head * s.head_dim_k;
    const int32_t v_off = kv_head * s.head_dim_v;
    float max = -INFINITY;
    for (int32_t j = 0; j <= pos; ++j) {
        scores[j] = kv.dot_k(layer, j, k_off, s.head_dim_k, q) * s.scale;
        max = std::max(max, scores[j]);
    }
    double sum = 0.0;
    for (int32_t j = 0; j <= pos; ++j) {
        scores[j] = std::exp(scores[j] - max);
        sum += double(scores[j]);
    }
    const float inv = float(1.0 / sum);
    std::fill(out, out + s.head_dim_v, 0.0f);
    for (int32_t j = 0; j <= pos; ++j) kv.axpy_v(layer, j, v_off, s.head_dim_v, scores[j] * inv, out);
}

void attend_kv_group(const KvCache &kv, int32_t layer, const AttentionShape &s, int32_t kv_head, const float *q,
                     int32_t pos, float *scores, float *out) {
    const int32_t group = s.n_head / s.n_head_kv;
    const int32_t dk = s.head_dim_k, dv = s.head_dim_v;
    const int32_t n_pos = pos + 1;
    if (dk > kMaxHeadDim || dv > kMaxHeadDim || group > kMaxGroup) {
        for (int32_t g = 0; g < group; ++g)
            attend_head(kv, layer, s, kv_head * group + g, q + size_t(g) * size_t(dk), pos,
                        scores + size_t(g) * size_t(n_pos), out + size_t(g) * size_t(dv));
        return;
    }
    const bool f32 = kv.is_f32();
    const size_t es = kv.element_bytes();
    const uint8_t *keys = kv.k_bytes(layer, n_pos).data() + size_t(kv_head) * size_t(dk) * es;
    const uint8_t *values = kv.v_bytes(layer, n_pos).data() + size_t(kv_head) * size_t(dv) * es;
    const size_t k_row = size_t(kv.k_dim()) * es, v_row = size_t(kv.v_dim()) * es;

    // Scores: kTile keys widened and transposed, then every head of the group
    // dots them with kTile independent sequential sums.
    alignas(64) float rows[kTile * kMaxHeadDim];
    alignas(64) float tile[kMaxHeadDim * kTile];
    int32_t p0 = 0;
    for (; p0 + kTile <= n_pos; p0 += kTile) {
        for (int32_t l = 0; l < kTile; ++l) widen(keys + size_t(p0 + l) * k_row, f32, dk, rows + l * dk);
        for (int32_t i = 0; i < dk; ++i)
            for (int32_t l = 0; l < kTile; ++l) tile[i * kTile + l] = rows[l * dk + i];
        for (int32_t g = 0; g < group; ++g) {
            const float *qg = q + size_t(g) * size_t(dk);
            float acc[kTile] = {};
            for (int32_t i = 0; i < dk; ++i) {
                const float qi = qg[i];
                for (int32_t l = 0; l < kTile; ++l) acc[l] += qi * tile[i * kTile + l];
            }
            float *sg = scores + size_t(g) * size_t(n_pos) + p0;
            for (int32_t l = 0; l < kTile; ++l) sg[l] = acc[l] * s.scale;
        }
    }
    for (; p0 < n_pos; ++p0) {
        widen(keys + size_t(p0) * k_row, f32, dk, rows);
        for (int32_t g = 0; g < group; ++g) {
            const float *qg = q + size_t(g) * size_t(dk);
            float sum = 0.0f;
            for (int32_t i = 0; i < dk; ++i) sum += qg[i] * rows[i];
            scores[size_t(g) * size_t(n_pos) + p0] = sum * s.scale;
        }
    }

    // Softmax per head, as attend_head.
    float inv[kMaxGroup];
    for (int32_t g = 0; g < group; ++g) {
        float *sg = scores + size_t(g) * size_t(n_pos);
        float max = -INFINITY;
        for (int32_t j = 0; j < n_pos; ++j) max = std::max(max, sg[j]);
        double sum = 0.0;
        for (int32_t j = 0; j < n_pos; ++j) {
            sg[j] = std::exp(sg[j] - max);
            sum += double(sg[j]);
        }
        inv[g] = float(1.0 / sum);
        std::fill(out + size_t(g) * size_t(dv), out + size_t(g + 1) * size_t(dv), 0.0f);
    }
    // Values: each row widened once, accumulated into every head in position order.
    for (int32_t j = 0; j < n_pos; ++j) {
        widen(values + size_t(j) * v_row, f32, dv, rows);
        for (int32_t g = 0; g < group; ++g) {
            const float a = scores[size_t(g) * size_t(n_pos) + j] * inv[g];
            float *og = out + size_t(g) * size_t(dv);
            for (int32_t i = 0; i < dv; ++i) og[i] += a * rows[i];
        }
    }
}

}  // namespace moe
