// attend_kv_group (all query heads of one KV head, keys dotted eight positions
// at a time) gives exactly attend_head's outputs, for f16 and f32 caches,
// head sizes on and off the tiled path and positions around the tile width.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "model/attention.hpp"
#include "model/kv_cache.hpp"

namespace {

std::vector<float> random_values(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float &x : v) x = d(rng);
    return v;
}

void expect_group_equals_heads(bool f32, int32_t n_head, int32_t n_kv, int32_t dk, int32_t dv, int32_t window = 0,
                               bool with_sinks = false) {
    const int32_t n_ctx = 37, n_layer = 2, layer = 1;
    moe::KvCache kv(n_layer, n_ctx, n_kv * dk, n_kv * dv, f32);
    for (int32_t p = 0; p < n_ctx; ++p) {
        const auto k = random_values(size_t(n_kv * dk), uint32_t(10 + p));
        const auto v = random_values(size_t(n_kv * dv), uint32_t(1000 + p));
        kv.store(layer, p, k.data(), v.data());
    }
    const moe::AttentionShape s{n_head, n_kv, dk, dv, 0.125f};
    const int32_t group = n_head / n_kv;
    const auto sinks = random_values(size_t(n_head), 5);
    for (int32_t pos : {0, 6, 7, 8, 9, 15, 16, 23, 36}) {
        const auto q = random_values(size_t(n_head * dk), uint32_t(77 + pos));
        const int32_t first = window > 0 ? std::max(0, pos - window + 1) : 0;
        for (int32_t kvh = 0; kvh < n_kv; ++kvh) {
            std::vector<float> scores(size_t(group) * size_t(n_ctx)), out(size_t(group) * size_t(dv), -1.0f);
            const float *group_sinks = with_sinks ? sinks.data() + size_t(kvh * group) : nullptr;
            moe::attend_kv_group(kv, layer, s, kvh, q.data() + size_t(kvh * group * dk), pos, scores.data(),
                                 out.data(), {first, group_sinks});
            for (int32_t g = 0; g < group; ++g) {
                const int32_t h = kvh * group + g;
                std::vector<float> sc(static_cast<size_t>(n_ctx)), ref(static_cast<size_t>(dv));
                moe::attend_head(kv, layer, s, h, q.data() + size_t(h * dk), pos, sc.data(), ref.data(),
                                 {first, with_sinks ? &sinks[size_t(h)] : nullptr});
                ASSERT_EQ(0, std::memcmp(ref.data(), out.data() + size_t(g * dv), size_t(dv) * sizeof(float)))
                    << "f32 " << f32 << " head " << h << " pos " << pos << " dk " << dk;
            }
        }
    }
}

TEST(AttentionGroup, EqualsPerHeadAttentionF16) {
    expect_group_equals_heads(false, 8, 2, 16, 16);
    expect_group_equals_heads(false, 32, 4, 128, 128);
    expect_group_equals_heads(false, 4, 4, 64, 32);
}

TEST(AttentionGroup, EqualsPerHeadAttentionF32) {
    expect_group_equals_heads(true, 8, 2, 16, 16);
    expect_group_equals_heads(true, 6, 2, 128, 64);
}

TEST(AttentionGroup, HeadsLargerThanTheTileFallBack) { expect_group_equals_heads(false, 4, 2, 512, 512); }

TEST(AttentionGroup, SlidingWindowAndSinksEqualPerHead) {
    for (int32_t window : {0, 1, 5, 9}) {
        expect_group_equals_heads(false, 8, 2, 64, 64, window, true);
        expect_group_equals_heads(true, 8, 2, 16, 16, window, window % 2 == 1);
        expect_group_equals_heads(false, 4, 2, 512, 512, window, true);
    }
}

// The softmax weights' exp against the double-precision exp over the whole
// range the softmax feeds it (score minus the maximum, clamped at -87).
TEST(SoftmaxExp, WithinFourUlpOfExpOverTheRange) {
    EXPECT_EQ(1.0f, moe::softmax_exp(0.0f));
    double worst = 0.0;
    float worst_x = 0.0f;
    for (int i = 0; i <= 2000000; ++i) {
        const float x = -87.0f * float(i) / 2000000.0f;
        const double want = std::exp(double(x));
        const double rel = std::fabs(double(moe::softmax_exp(x)) - want) / want;
        if (rel > worst) worst = rel, worst_x = x;
    }
    EXPECT_LT(worst, 4.0 * 0x1p-24) << "at x = " << worst_x;
    // Below the clamp the weight stays a tiny normal number, never NaN or 0.
    EXPECT_GT(moe::softmax_exp(-1000.0f), 0.0f);
    EXPECT_LT(moe::softmax_exp(-1000.0f), 1e-37f);
    EXPECT_EQ(moe::softmax_exp(-INFINITY), moe::softmax_exp(-87.0f));
    // A NaN score stays visible as a NaN weight.
    EXPECT_TRUE(std::isnan(moe::softmax_exp(NAN)));
}

}  // namespace
