// The KV cache's rings for sliding-window layers: the layout's sizes, that
// attention over a ring gives the bits it gives over a cache that keeps every
// position (tiled and per-head paths, f16 and f32, runs that wrap), the raw
// rows saved and restored, and the window a failed step puts back.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "model/attention.hpp"
#include "model/hparams.hpp"
#include "model/kv_cache.hpp"
#include "support/kernel_data.hpp"

namespace {

using moe::KvCache;
using moe::KvLayout;
using moe::KvPart;

std::vector<float> random_values(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    return moe::test::random_floats(int64_t(n), rng);
}

// Layer 0 full, layer 1 a ring of `rows` rows for a window of `window`.
KvLayout ring_layout(int32_t n_ctx, int32_t k_dim, int32_t v_dim, int32_t window, int32_t rows) {
    KvLayout l = KvLayout::full(2, n_ctx, k_dim, v_dim);
    l.window[1] = window;
    l.rows[1] = rows;
    return l;
}

void store_position(KvCache &kv, int32_t layer, int32_t pos) {
    const auto k = random_values(size_t(kv.k_dim()), uint32_t(10 + pos));
    const auto v = random_values(size_t(std::max(kv.v_dim(), 1)), uint32_t(5000 + pos));
    kv.store(layer, pos, k.data(), v.data());
}

TEST(KvLayout, SlidingLayersGetARingOfTheWindowPlusAChunk) {
    moe::HParams hp;
    hp.n_layer = 4;
    hp.n_head_kv = 2;
    hp.head_dim_k = hp.head_dim_v = 8;
    hp.n_swa = 16;
    hp.swa_layers = moe::swa_layers_of_period(4, 2);
    const KvLayout l = moe::kv_layout_for(hp, 1000, 8);
    EXPECT_EQ(l.rows, (std::vector<int32_t>{23, 1000, 23, 1000}));
    EXPECT_EQ(l.window, (std::vector<int32_t>{16, 0, 16, 0}));
    EXPECT_TRUE(l.is_ring(0));
    EXPECT_FALSE(l.is_ring(1));
    EXPECT_EQ(l.kept_rows(0), 15);
    EXPECT_EQ(l.kept_rows(1), 0);
    // Rows of both rings, their kept copies and both full layers, K and V f16.
    EXPECT_EQ(l.bytes(2), uint64_t(2 * 23 + 2 * 15 + 2 * 1000) * 32 * 2);
    EXPECT_EQ(KvCache(l, false).bytes(), l.bytes(2));
    EXPECT_EQ(KvCache(l, true).bytes(), l.bytes(4));
    // A context no longer than the ring keeps every position: no ring, no copy.
    const KvLayout short_ctx = moe::kv_layout_for(hp, 20, 8);
    EXPECT_EQ(short_ctx.rows, (std::vector<int32_t>{20, 20, 20, 20}));
    EXPECT_FALSE(short_ctx.is_ring(0));
    EXPECT_EQ(short_ctx.bytes(2), uint64_t(4 * 20) * 32 * 2);
    // Without a window every layer is full.
    hp.n_swa = 0;
    EXPECT_EQ(moe::kv_layout_for(hp, 1000, 8).rows, (std::vector<int32_t>(4, 1000)));
}

// Every query position of a context four windows long, over a ring written
// chunk by chunk as steps write it, against a full cache with the same rows.
void expect_ring_equals_full(bool f32, int32_t n_head, int32_t n_kv, int32_t dk, int32_t dv, int32_t window,
                             int32_t chunk) {
    const int32_t n_ctx = 4 * window + 3, rows = window + chunk - 1;
    KvCache full(2, n_ctx, n_kv * dk, n_kv * dv, f32);
    KvCache ring(ring_layout(n_ctx, n_kv * dk, n_kv * dv, window, rows), f32);
    const moe::AttentionShape s{n_head, n_kv, dk, dv, 0.125f};
    const int32_t group = n_head / n_kv;
    const auto sinks = random_values(size_t(n_head), 5);
    std::vector<float> scores(size_t(group) * size_t(n_ctx)), a(size_t(group) * size_t(dv)), b(a.size());
    for (int32_t n_past = 0; n_past < n_ctx; n_past += chunk) {
        const int32_t n = std::min(chunk, n_ctx - n_past);
        for (int32_t p = n_past; p < n_past + n; ++p) {
            store_position(full, 1, p);
            store_position(ring, 1, p);
        }
        // Every token of the chunk attends after all of its keys are stored.
        for (int32_t pos = n_past; pos < n_past + n; ++pos) {
            const auto q = random_values(size_t(n_head * dk), uint32_t(77 + pos));
            const moe::AttentionSpan span{std::max(0, pos - window + 1), nullptr};
            for (int32_t kvh = 0; kvh < n_kv; ++kvh) {
                const float *qh = q.data() + size_t(kvh * group * dk);
                const moe::AttentionSpan sp{span.first, sinks.data() + size_t(kvh * group)};
                moe::attend_kv_group(full, 1, s, kvh, qh, pos, scores.data(), a.data(), sp);
                moe::attend_kv_group(ring, 1, s, kvh, qh, pos, scores.data(), b.data(), sp);
                ASSERT_TRUE(std::all_of(a.begin(), a.end(), [](float x) { return std::isfinite(x); }));
                ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
                    << "group, pos " << pos << " dk " << dk << " f32 " << f32;
                moe::attend_head(full, 1, s, kvh * group, qh, pos, scores.data(), a.data(), sp);
                moe::attend_head(ring, 1, s, kvh * group, qh, pos, scores.data(), b.data(), sp);
                ASSERT_EQ(0, std::memcmp(a.data(), b.data(), size_t(dv) * sizeof(float))) << "head, pos " << pos;
            }
        }
    }
}

TEST(KvCacheRing, AttentionOverARingEqualsAFullCacheBitForBit) {
    for (const int32_t chunk : {1, 3, 8}) {
        expect_ring_equals_full(false, 8, 2, 64, 64, 5, chunk);    // tiled, f16
        expect_ring_equals_full(true, 8, 2, 16, 16, 9, chunk);     // tiled, f32, a window over a tile
        expect_ring_equals_full(false, 4, 2, 512, 512, 3, chunk);  // per-head fallback
        expect_ring_equals_full(true, 4, 4, 32, 32, 1, chunk);     // only the query's own position
    }
}

// A ring layer saves and restores its window's rows as bytes, position after
// position, also where they wrap; a latent cache (keys only) has no V part.
TEST(KvCacheRing, RowsRoundTripAcrossTheWrap) {
    for (const int32_t v_dim : {8, 0}) {
        const int32_t window = 4, rows = 6, n_ctx = 40;
        KvCache a(ring_layout(n_ctx, 8, v_dim, window, rows), false);
        KvCache b(ring_layout(n_ctx, 8, v_dim, window, rows), false);
        const int32_t n_past = 17;  // rows of positions 14..16 sit at 2, 3, 4; 12 and 13 at 0 and 1
        for (int32_t p = 0; p < n_past; ++p) store_position(a, 1, p);
        EXPECT_EQ(a.first_needed(1, n_past), n_past - (window - 1));
        EXPECT_EQ(a.first_needed(0, n_past), 0);
        EXPECT_EQ(a.first_needed(1, 2), 0);
        for (const KvPart part : {KvPart::k, KvPart::v}) {
            const auto spans = a.row_bytes(part, 1, 11, n_past);  // 11 at row 5, then the wrap
            ASSERT_EQ(spans[0].size(), 1u * 16);
            ASSERT_EQ(spans[1].size(), 5u * 16);
            std::vector<uint8_t> image(spans[0].begin(), spans[0].end());
            image.insert(image.end(), spans[1].begin(), spans[1].end());
            b.write_rows(part, 1, 11, image);
        }
        for (int32_t p = 11; p < n_past; ++p) {
            std::vector<float> x(8), y(8);
            a.load_k(1, p, 0, 8, x.data());
            b.load_k(1, p, 0, 8, y.data());
            EXPECT_EQ(x, y) << p;
            a.load_v(1, p, 0, 8, x.data());
            b.load_v(1, p, 0, 8, y.data());
            EXPECT_EQ(x, y) << p;
        }
    }
}

// keep_window / restore_window: a step of more than one chunk that fails
// after its later chunks overwrote the window gets the window back.
TEST(KvCacheRing, RestoredWindowIsTheOneKept) {
    const int32_t window = 5, chunk = 2, rows = window + chunk - 1, n_ctx = 50, n_past = 23;
    KvCache kv(ring_layout(n_ctx, 16, 16, window, rows), true);
    for (int32_t p = 0; p < n_past; ++p) store_position(kv, 1, p);
    std::vector<std::vector<float>> before;
    for (int32_t p = n_past - (window - 1); p < n_past; ++p) {
        before.emplace_back(16);
        kv.load_k(1, p, 0, 16, before.back().data());
    }
    kv.keep_window(n_past);
    // Three chunks' positions written, as a failing step of six tokens would.
    std::vector<float> junk(16, 99.0f);
    for (int32_t p = n_past; p < n_past + 3 * chunk; ++p) kv.store(1, p, junk.data(), junk.data());
    kv.restore_window(n_past);
    for (int32_t p = n_past - (window - 1), i = 0; p < n_past; ++p, ++i) {
        std::vector<float> k(16), v(16);
        kv.load_k(1, p, 0, 16, k.data());
        kv.load_v(1, p, 0, 16, v.data());
        EXPECT_EQ(k, before[size_t(i)]) << p;
        EXPECT_NE(v, junk) << p;
    }
}

}  // namespace
