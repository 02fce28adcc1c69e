// Row and token-tile loops shared by the SIMD kernel files.
//
// A kernel K describes one weight type on one ISA:
//   using Prep = ...;                           // one prepared activation row
//   static constexpr int64_t kBlockElems;       // elements per weight block
//   static size_t prep_bytes(int64_t nb);       // scratch bytes per token
//   static Prep prepare(const uint8_t *act, int64_t nb, uint8_t *space);
//   template <int T> static void row(const uint8_t *w, const Prep *p, int64_t nb, float *out);
//   optionally, for rows too short to fill the kernel's inner loop:
//   static bool short_rows(int64_t nb);  template <int T> static void rows8(
//       const uint8_t *w, size_t row_bytes, const Prep *p, int64_t nb, float (*out)[8]);
//   (eight rows at once, out[t][i] = what row<T> gives row i for token t)
// row<T> decodes each weight block of one row once and dots it against T
// prepared token rows, writing T results. Every T computes per token exactly
// what T = 1 computes (same integer block sums, same float operations in the
// same order), so matmat equals matvec per token bit for bit, and matvec is
// the one-token instance of the same code.
//
// Internal linkage on purpose: each ISA file compiles its own copy.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kernels_internal.hpp"

namespace moe::kernels::detail {
namespace {

// Token rows dotted against one decoded weight block (registers permitting);
// a kernel may set its own K::kTokenTile.
constexpr int kTokenTile = 4;

template <typename K>
constexpr int token_tile() {
    if constexpr (requires { K::kTokenTile; }) return K::kTokenTile;
    else return kTokenTile;
}

constexpr size_t round_up64(size_t v) { return (v + 63) / 64 * 64; }

template <typename K>
struct Tiled {
    using Prep = typename K::Prep;

    static constexpr int kTile = token_tile<K>();

    template <int T>
    static void rows(const uint8_t *w, size_t row_bytes, const Prep *p, int64_t nb, float *y, size_t y_stride,
                     int64_t r0, int64_t r1) {
        int64_t r = r0;
        if constexpr (requires { K::short_rows(nb); })
            if (K::short_rows(nb))
                for (; r + 8 <= r1; r += 8) {
                    float out[T][8];
                    K::template rows8<T>(w + r * row_bytes, row_bytes, p, nb, out);
                    for (int t = 0; t < T; ++t)
                        for (int i = 0; i < 8; ++i) y[t * y_stride + r + i] = out[t][i];
                }
        for (; r < r1; ++r) {
            float out[T];
            K::template row<T>(w + r * row_bytes, p, nb, out);
            for (int t = 0; t < T; ++t) y[t * y_stride + r] = out[t];
        }
    }

    // Scratch of one call: the Prep of every token, then each token's
    // prepared activations.
    struct ScratchLayout {
        size_t head, per_token, bytes;
        ScratchLayout(int64_t n, int32_t n_tokens)
            : head(round_up64(static_cast<size_t>(n_tokens) * sizeof(Prep))),
              per_token(round_up64(K::prep_bytes(n / K::kBlockElems))),
              bytes(head + static_cast<size_t>(n_tokens) * per_token) {}
    };
    static size_t scratch_bytes(int64_t n, int32_t n_tokens) { return ScratchLayout(n, n_tokens).bytes; }

    static void matmat(int64_t n, const uint8_t *w, size_t row_bytes, const void *act, size_t act_stride,
                       int32_t n_tokens, float *y, size_t y_stride, int64_t r0, int64_t r1) {
        if (n_tokens <= 0 || r1 <= r0) return;
        const int64_t nb = n / K::kBlockElems;
        const ScratchLayout layout(n, n_tokens);
        auto *scratch = static_cast<uint8_t *>(kernel_scratch(layout.bytes));
        Prep *preps = reinterpret_cast<Prep *>(scratch);
        for (int32_t t = 0; t < n_tokens; ++t)
            preps[t] = K::prepare(static_cast<const uint8_t *>(act) + t * act_stride, nb,
                                  scratch + layout.head + static_cast<size_t>(t) * layout.per_token);
        // Token tiles outside, rows inside: a task's rows stay in L2 between tiles.
        for (int32_t t0 = 0; t0 < n_tokens; t0 += kTile) {
            const int tile = n_tokens - t0 < kTile ? n_tokens - t0 : kTile;
            tile_rows(tile, w, row_bytes, preps + t0, nb, y + static_cast<size_t>(t0) * y_stride, y_stride, r0, r1);
        }
    }

    // rows<tile> for a run-time tile of 1 .. kTile tokens.
    template <int T = 1>
    static void tile_rows(int tile, const uint8_t *w, size_t row_bytes, const Prep *p, int64_t nb, float *y,
                          size_t y_stride, int64_t r0, int64_t r1) {
        if constexpr (T < kTile)
            if (tile != T) return tile_rows<T + 1>(tile, w, row_bytes, p, nb, y, y_stride, r0, r1);
        rows<T>(w, row_bytes, p, nb, y, y_stride, r0, r1);
    }

    static void matvec(int64_t n, const uint8_t *w, size_t row_bytes, const void *act, float *y, int64_t r0,
                       int64_t r1) {
        // One token; y is offset so that y[r - r0] receives row r.
        matmat(n, w, row_bytes, act, 0, 1, y - r0, 0, r0, r1);
    }

    static float dot(int64_t n, const void *w_row, const void *act) {
        float y;
        matvec(n, static_cast<const uint8_t *>(w_row), 0, act, &y, 0, 1);
        return y;
    }

    static void install(KernelTable &t, GgmlType type) {
        TypeKernels &k = t.type[static_cast<uint32_t>(type)];
        k.dot = dot;
        k.matvec = matvec;
        k.matmat = matmat;
        k.scratch_bytes = scratch_bytes;
    }
};

}  // namespace
}  // namespace moe::kernels::detail
