// Attention over a keys-only cache (latent attention): every query head
// attends to the one shared key row per position, and its value is the first
// head_dim_v elements of that row. Checked against a direct double loop, for
// both attention paths and for head sizes up to DeepSeek's 576 / 512.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "model/attention.hpp"
#include "model/kv_cache.hpp"

namespace {

std::vector<float> random_vector(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float &x : v) x = d(rng);
    return v;
}

struct Case {
    int32_t n_head, dk, dv;
};

void check_latent(const Case &c, bool f32_cache, bool grouped, double tol) {
    const int32_t n_ctx = 11, layer = 1;
    moe::KvCache kv(2, n_ctx, c.dk, 0, f32_cache);
    ASSERT_TRUE(kv.values_in_keys());
    std::vector<std::vector<float>> keys;
    for (int32_t p = 0; p < n_ctx; ++p) {
        keys.push_back(random_vector(size_t(c.dk), uint32_t(100 + p)));
        kv.store(layer, p, keys.back().data(), nullptr);
    }
    EXPECT_EQ(kv.bytes(), size_t(2 * n_ctx * c.dk) * kv.element_bytes());  // keys only, no V rows
    const float scale = 0.25f / std::sqrt(float(c.dk));
    const moe::AttentionShape s{c.n_head, 1, c.dk, c.dv, scale};
    std::vector<float> scores(size_t(c.n_head) * size_t(n_ctx)), out(size_t(c.n_head) * size_t(c.dv));
    for (int32_t pos : {0, 4, n_ctx - 1}) {
        const auto q = random_vector(size_t(c.n_head) * size_t(c.dk), uint32_t(300 + pos));
        if (grouped) {
            moe::attend_kv_group(kv, layer, s, 0, q.data(), pos, scores.data(), out.data());
        } else {
            for (int32_t h = 0; h < c.n_head; ++h)
                moe::attend_head(kv, layer, s, h, q.data() + size_t(h) * size_t(c.dk), pos, scores.data(),
                                 out.data() + size_t(h) * size_t(c.dv));
        }
        for (int32_t h = 0; h < c.n_head; ++h) {
            std::vector<double> sc(size_t(pos + 1));
            double max = -1e300;
            for (int32_t j = 0; j <= pos; ++j) {
                double d = 0;
                for (int32_t i = 0; i < c.dk; ++i)
                    d += double(q[size_t(h) * size_t(c.dk) + size_t(i)]) * keys[size_t(j)][size_t(i)];
                sc[size_t(j)] = d * scale;
                max = std::max(max, sc[size_t(j)]);
            }
            double sum = 0;
            for (double &v : sc) sum += (v = std::exp(v - max));
            for (int32_t i = 0; i < c.dv; ++i) {
                double o = 0;
                for (int32_t j = 0; j <= pos; ++j) o += sc[size_t(j)] / sum * keys[size_t(j)][size_t(i)];
                ASSERT_NEAR(out[size_t(h) * size_t(c.dv) + size_t(i)], o, tol)
                    << "pos " << pos << " head " << h << " dim " << i;
            }
        }
    }
}

TEST(LatentAttention, SmallHeadsBothPathsF32) {
    check_latent({4, 48, 32}, true, false, 1e-5);
    check_latent({4, 48, 32}, true, true, 1e-5);
}

TEST(LatentAttention, DeepSeekSizedHeadsBothPaths) {
    check_latent({3, 576, 512}, true, false, 1e-4);
    check_latent({3, 576, 512}, true, true, 1e-4);
    check_latent({3, 576, 512}, false, true, 5e-3);
}

// Both paths give the same bits (the multi-token and one-token steps rely on it).
TEST(LatentAttention, GroupedEqualsPerHeadBitForBit) {
    const int32_t n_head = 5, dk = 96, dv = 64, n_ctx = 13;
    for (bool f32 : {true, false}) {
        moe::KvCache kv(1, n_ctx, dk, 0, f32);
        for (int32_t p = 0; p < n_ctx; ++p) kv.store(0, p, random_vector(size_t(dk), uint32_t(p)).data(), nullptr);
        const moe::AttentionShape s{n_head, 1, dk, dv, 0.1f};
        const auto q = random_vector(size_t(n_head) * size_t(dk), 77);
        std::vector<float> scores(size_t(n_head) * size_t(n_ctx)), a(size_t(n_head) * size_t(dv)), b(a.size());
        moe::attend_kv_group(kv, 0, s, 0, q.data(), n_ctx - 1, scores.data(), a.data());
        for (int32_t h = 0; h < n_head; ++h)
            moe::attend_head(kv, 0, s, h, q.data() + size_t(h) * size_t(dk), n_ctx - 1, scores.data(),
                             b.data() + size_t(h) * size_t(dv));
        EXPECT_EQ(a, b) << "f32 " << f32;
    }
}

}  // namespace
