// The K-quant row loop with a full group's eight super-blocks unrolled at
// compile time (KRows' loop otherwise; included by the AVX2 and AVX-512
// kernel files, each compiling its own copy).
//
// Partial sums are reduced as they are produced (D::Fold: total8's network,
// one level per pair of blocks), so a token keeps at most three partial
// vectors live instead of eight and more tokens fit in registers. A decoder
// may decode the heads of a group's eight super-blocks together (D::Head,
// D::head8, D::decode<J>(w, head), and D::min_sums8<kOneBlock>(head, bpair)
// if D has mins per pair of groups), may keep its mins per 16-element group
// (D::kGroupMins with D::group_min_sums8 against the activation's group
// sums), may take over a group's whole epilogue (D::group_terms8: the fold's
// totals, mins and fp16 fields to the float terms), and may give each block
// in parts (see kInParts). Prefetches stay at their
// block (prefetch_in_place). The integer totals and the float epilogue are
// KRows' (same operations in the same order), so results equal KRows' bit
// for bit.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/quant_rows.hpp"

namespace moe::kernels::detail {
namespace {

template <int... J, typename F>
MOE_ALWAYS_INLINE void unrolled(std::integer_sequence<int, J...>, F &&f) {
    (f(std::integral_constant<int, J>{}), ...);
}

template <typename D>
struct KRowsUnrolled : KRows<D> {
    using Base = KRows<D>;
    using Prep = KPrep;
    using Fold = typename D::Fold;
    static constexpr int kTokenTile = 4;

    // D::head8 (heads of a group decoded together) if D has it.
    template <typename X, typename = void>
    struct HeadsOf : std::false_type {
        struct type {};
    };
    template <typename X>
    struct HeadsOf<X, std::void_t<typename X::Head>> : std::true_type {
        using type = typename X::Head;
    };
    using Heads = HeadsOf<D>;

    // Prefetches the cache lines that start inside block J of a group.
    template <int J>
    MOE_ALWAYS_INLINE static void prefetch_block(const uint8_t *group) {
        constexpr size_t first = (J * D::kBytes + 63) / 64, end = ((J + 1) * D::kBytes + 63) / 64;
        for (size_t l = first; l < end; ++l) prefetch_in_place(group + kPrefetchAhead + 64 * l);
    }

    MOE_ALWAYS_INLINE static const uint8_t *arranged(const Prep &p, int64_t blk) {
        return p.arranged + (D::kArranged ? Base::kArrangedBytes : q8_k::bytes) * blk;
    }
    MOE_ALWAYS_INLINE static const uint8_t *act(const Prep &p, int64_t blk) { return p.act + q8_k::bytes * blk; }

    // A decoder in parts (D::kParts) gives a block as a context (its scales:
    // D::context<J>(w, head), or D::context(w, mins, dm) without heads) and
    // kParts parts of its quants (D::part(w, ctx, i)); each part is dotted
    // against every token (D::part_sums, from D::start(ctx, act)) before the
    // next is decoded, so a block's registers are never all live at once
    // (with sixteen ymm registers a whole block and four tokens' sums spill).
    static constexpr bool kInParts = requires { D::kParts; };

    // Each token's partial sums of the block at wb (context ctx) into s[t].
    template <int T, typename Ctx>
    MOE_ALWAYS_INLINE static void part_sums(const uint8_t *wb, const Ctx &ctx, const Prep *p, int64_t blk,
                                            typename D::Partial *s) {
        for (int t = 0; t < T; ++t) s[t] = D::start(ctx, act(p[t], blk));
        for (int i = 0; i < D::kParts; ++i) {
            const typename D::Part part = D::part(wb, ctx, i);
            for (int t = 0; t < T; ++t) s[t] = D::part_sums(part, arranged(p[t], blk), i, s[t]);
        }
    }

    // Each token's partial sums of a block without a decoded head (mins / dm
    // as D::decode gives them) into s[t].
    template <int T>
    MOE_ALWAYS_INLINE static void block_sums(const uint8_t *wb, uint64_t &mins, uint32_t &dm, const Prep *p,
                                             int64_t blk, typename D::Partial *s) {
        if constexpr (kInParts) {
            part_sums<T>(wb, D::context(wb, mins, dm), p, blk, s);
        } else {
            const typename D::Block k = D::decode(wb, mins, dm);
            for (int t = 0; t < T; ++t) s[t] = D::sums(k, arranged(p[t], blk), act(p[t], blk));
        }
    }

    // sum_g m_g * bsum_g of eight blocks `stride` bytes apart (weights from
    // w) against the activation blocks blk.. (against block blk for every
    // block with kOneBlock: the same block of eight rows): D's own per
    // 16-element group (kGroupMins), none when D has no mins, D::min_sums8 of
    // the heads D decoded together, else KRows' of the mins D::decode gave.
    template <bool kOneBlock>
    MOE_ALWAYS_INLINE static __m256i mins_of_group8(const typename Heads::type &head, const uint8_t *w,
                                                    size_t stride, const uint64_t *mins, const Prep &p, int64_t blk) {
        if constexpr (requires { D::kGroupMins; }) {
            return D::group_min_sums8(w, stride, act(p, blk), kOneBlock ? 0 : q8_k::bytes, 8);
        } else if constexpr (!D::kMins) {
            return _mm256_setzero_si256();
        } else if constexpr (Heads::value) {
            return D::template min_sums8<kOneBlock>(head, p.bpair + 8 * blk);
        } else {
            static_assert(!kOneBlock, "decoders with mins per pair of groups decode their heads together");
            return Base::min_sums8(mins, p.bpair + 8 * blk);
        }
    }
    // The fp16 fields of a group's eight blocks (lane j: block j): the heads'
    // or those D::decode gave.
    MOE_ALWAYS_INLINE static __m256i group_fields8(const typename Heads::type &head, const uint32_t *dm) {
        if constexpr (Heads::value) return head.dm;
        else return _mm256_load_si256(reinterpret_cast<const __m256i *>(dm));
    }

    // A full group's eight float terms (lane j: block j; KRows::terms8's
    // products): D's own from the fold and the heads (D::group_terms8) if it
    // has them, else terms8 of the fold's totals and the helpers above. With
    // kOneBlock every block meets activation block blk (rows8), da the
    // activation scales.
    template <bool kOneBlock>
    MOE_ALWAYS_INLINE static __m256 group_terms8(const Fold &fold, const typename Heads::type &head, const uint8_t *w,
                                                 size_t stride, const uint32_t *dm, const uint64_t *mins,
                                                 const Prep &p, int64_t blk, __m256 da) {
        if constexpr (requires { D::group_terms8(fold, head, w, stride, w, stride, da); })
            return D::group_terms8(fold, head, w, stride, act(p, blk), kOneBlock ? 0 : q8_k::bytes, da);
        else
            return Base::terms8(group_fields8(head, dm), fold.total(),
                                mins_of_group8<kOneBlock>(head, w, stride, mins, p, blk), da);
    }

    // Block J of a group (weights at wb) against activation block blk of
    // each token, folded into fold[t].
    template <int J, int T>
    MOE_ALWAYS_INLINE static void block(const uint8_t *wb, const typename Heads::type &head, uint64_t &mins,
                                        uint32_t &dm, const Prep *p, int64_t blk, Fold *fold) {
        typename D::Partial s[T];
        if constexpr (!Heads::value) {
            block_sums<T>(wb, mins, dm, p, blk, s);
        } else if constexpr (kInParts) {
            part_sums<T>(wb, D::template context<J>(wb, head), p, blk, s);
        } else {
            const typename D::Block k = D::template decode<J>(wb, head);
            for (int t = 0; t < T; ++t) s[t] = D::sums(k, arranged(p[t], blk), act(p[t], blk));
        }
        for (int t = 0; t < T; ++t) fold[t].template add<J>(s[t]);
    }

    template <int T>
    static void row(const uint8_t *w, const Prep *p, int64_t nb, float *out) {
        __m256 acc[T];
        for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
        int64_t b = 0;
        for (; b + 8 <= nb; b += 8, w += 8 * D::kBytes) {
            alignas(64) uint64_t mins[8];
            alignas(32) uint32_t dm[8];
            [[maybe_unused]] typename Heads::type head;
            if constexpr (Heads::value) head = D::head8(w, D::kBytes);
            Fold fold[T];
            unrolled(std::make_integer_sequence<int, 8>{}, [&](auto jc) {
                constexpr int j = decltype(jc)::value;
                prefetch_block<j>(w);
                block<j, T>(w + j * D::kBytes, head, mins[j], dm[j], p, b + j, fold);
            });
            for (int t = 0; t < T; ++t) {
                const __m256 da = _mm256_loadu_ps(p[t].d + b);
                acc[t] = _mm256_add_ps(acc[t], group_terms8<false>(fold[t], head, w, D::kBytes, dm, mins, p[t], b, da));
            }
        }
        if (b < nb) tail<T>(w, p, b, nb, acc);
        for (int t = 0; t < T; ++t) {
            alignas(32) float lanes[8];
            _mm256_store_ps(lanes, acc[t]);
            out[t] = BlockLanes::reduce8(lanes);
        }
    }

    // Eight rows of fewer than 8 super-blocks (see KRows::rows8, same terms in
    // the same order): super-block j of the eight rows is decoded and reduced
    // like a group of row(), heads decoded together across the rows.
    //
    // One token reads the rows in memory order, row by row, each super-block
    // j folding into its own fold (rows in the order of a group's blocks):
    // the eight rows are then one ascending stream, which the hardware
    // prefetcher follows. Taken block-major (block j of every row, then
    // j + 1) the reads hop back and forth over the rows' few KiB, and the
    // Q6_K down projections of the Qwen3-30B-A3B shape (768-element rows)
    // streamed from memory at under half the rate of long rows (8-10
    // against 20-24 GB/s per CPU-second, one thread). With several tokens the kernel computes more
    // per byte than memory delivers, so it keeps the block-major order,
    // whose folds and heads stay in registers.
    template <int T>
    static void rows8(const uint8_t *w, size_t row_bytes, const Prep *p, int64_t nb, float (*out)[8]) {
        alignas(32) float terms[T][8][8] = {};  // [token][super-block j][row i]
        if constexpr (T == 1) {
            alignas(64) uint64_t mins[8][8];  // [super-block j][row i]
            alignas(32) uint32_t dm[8][8];
            [[maybe_unused]] typename Heads::type head[8];
            Fold fold[8][1];
            if constexpr (Heads::value)
                for (int64_t j = 0; j < nb; ++j) head[j] = D::head8(w + j * D::kBytes, row_bytes);
            unrolled(std::make_integer_sequence<int, 8>{}, [&](auto ic) {
                constexpr int i = decltype(ic)::value;
                for (int64_t j = 0; j < nb; ++j) {
                    const uint8_t *wb = w + i * row_bytes + j * D::kBytes;
                    prefetch_ahead<D::kBytes, true>(wb);
                    block<i, 1>(wb, head[j], mins[j][i], dm[j][i], p, j, fold[j]);
                }
            });
            for (int64_t j = 0; j < nb; ++j)
                store_terms8<1>(fold[j], head[j], w + j * D::kBytes, row_bytes, dm[j], mins[j], p, j, terms);
        } else {
            for (int64_t j = 0; j < nb; ++j) {
                const uint8_t *wj = w + j * D::kBytes;
                alignas(64) uint64_t mins[8];
                alignas(32) uint32_t dm[8];
                [[maybe_unused]] typename Heads::type head;
                if constexpr (Heads::value) head = D::head8(wj, row_bytes);
                Fold fold[T];
                unrolled(std::make_integer_sequence<int, 8>{}, [&](auto ic) {
                    constexpr int i = decltype(ic)::value;
                    const uint8_t *wb = wj + i * row_bytes;
                    prefetch_ahead<D::kBytes, true>(wb);
                    block<i, T>(wb, head, mins[i], dm[i], p, j, fold);
                });
                store_terms8<T>(fold, head, wj, row_bytes, dm, mins, p, j, terms);
            }
        }
        for (int t = 0; t < T; ++t) Base::reduce_rows8(terms[t], out[t]);
    }

    // Super-block j's float terms of the eight rows (lane i: row i) into
    // terms[t][j] for each token.
    template <int T>
    MOE_ALWAYS_INLINE static void store_terms8(const Fold *fold, const typename Heads::type &head, const uint8_t *wj,
                                               size_t row_bytes, const uint32_t *dm, const uint64_t *mins,
                                               const Prep *p, int64_t j, float (*terms)[8][8]) {
        for (int t = 0; t < T; ++t) {
            const __m256 da = _mm256_set1_ps(p[t].d[j]);
            // Every row's mins meet block j's pair (or group) sums.
            const __m256 term = group_terms8<true>(fold[t], head, wj, row_bytes, dm, mins, p[t], j, da);
            _mm256_store_ps(terms[t][j], _mm256_add_ps(_mm256_setzero_ps(), term));
        }
    }

    // The last nb - b < 8 super-blocks (lanes 0 .. nb - b - 1).
    template <int T>
    static void tail(const uint8_t *w, const Prep *p, int64_t b, int64_t nb, __m256 *acc) {
        const int cnt = static_cast<int>(nb - b);
        typename D::Partial s[T][8];
        alignas(64) uint64_t mins[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        alignas(32) uint32_t dm[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int j = 0; j < 8; ++j)
            for (int t = 0; t < T; ++t) s[t][j] = typename D::Partial{};
        for (int j = 0; j < cnt; ++j) {
            typename D::Partial sj[T];
            block_sums<T>(w + j * D::kBytes, mins[j], dm[j], p, b + j, sj);
            for (int t = 0; t < T; ++t) s[t][j] = sj[t];
        }
        for (int t = 0; t < T; ++t) {
            alignas(32) float lanes[8];
            alignas(32) int32_t si[8], sm[8];
            _mm256_store_ps(lanes, acc[t]);
            _mm256_store_si256(reinterpret_cast<__m256i *>(si), D::total8(s[t]));
            _mm256_store_si256(reinterpret_cast<__m256i *>(sm),
                               D::kMins ? Base::block_min_sums8(w, mins, p[t], b, cnt) : _mm256_setzero_si256());
            for (int j = 0; j < cnt; ++j) lanes[j] += Base::term1(dm[j], si[j], sm[j], p[t].d[b + j]);
            acc[t] = _mm256_load_ps(lanes);
        }
    }
};

}  // namespace
}  // namespace moe::kernels::detail
