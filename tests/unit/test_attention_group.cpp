// attend_kv_group (all query heads of one KV head, keys dotted 16 or eight
// positions at a time) gives exactly attend_head's outputs, for f16 and f32
// caches, head sizes on and off the tiled path, positions around the tile
// widths, groups and value sizes that leave partial register blocks, latent
// attention's keys-only cache and sliding-window rings that wrap, on the wide
// (AVX-512) and the narrow path; and each position's weight comes from that
// position's own key.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/kernels.hpp"
#include "model/attention.hpp"
#include "model/kv_cache.hpp"
#include "support/kernel_data.hpp"

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

// 640 is past the tiled path's largest head (576): attend_kv_group falls back to attend_head per head.
TEST(AttentionGroup, HeadsLargerThanTheTileFallBack) { expect_group_equals_heads(false, 4, 2, 640, 640); }

TEST(AttentionGroup, SlidingWindowAndSinksEqualPerHead) {
    for (int32_t window : {0, 1, 5, 9}) {
        expect_group_equals_heads(false, 8, 2, 64, 64, window, true);
        expect_group_equals_heads(true, 8, 2, 16, 16, window, window % 2 == 1);
        expect_group_equals_heads(false, 4, 2, 640, 640, window, true);
    }
}

// The tiled path's layouts against attend_head, bit for bit: every position
// of a context that ends inside a tile, for each KV head, over a full cache or
// a ring of window + 3 rows that the context wraps several times. Contexts of
// 1 to 45 positions take up to two whole tiles of 16 (or five of 8) and then
// a last tile of every size short of whole, padded past its last key, on both
// widths.
struct TileCase {
    int32_t n_kv, group, dk, dv;
    bool latent;  // keys only: the value is the first dv elements of the key
};

void expect_tiled_equals_heads(bool f32, const TileCase &c, int32_t window) {
    const int32_t n_ctx = 45, n_head = c.n_kv * c.group;
    moe::KvLayout layout = moe::KvLayout::full(1, n_ctx, c.n_kv * c.dk, c.latent ? 0 : c.n_kv * c.dv);
    if (window > 0) {
        layout.window[0] = window;
        layout.rows[0] = window + 3;
    }
    moe::KvCache kv(layout, f32);
    ASSERT_EQ(window > 0, layout.is_ring(0));
    const moe::AttentionShape s{n_head, c.n_kv, c.dk, c.dv, 0.25f / std::sqrt(float(c.dk))};
    std::vector<float> scores(size_t(c.group) * size_t(n_ctx)), out(size_t(c.group) * size_t(c.dv));
    std::vector<float> sc(static_cast<size_t>(n_ctx)), ref(static_cast<size_t>(c.dv));
    for (int32_t pos = 0; pos < n_ctx; ++pos) {
        const auto k = random_values(size_t(c.n_kv * c.dk), uint32_t(10 + pos));
        const auto v = random_values(size_t(c.n_kv * c.dv), uint32_t(1000 + pos));
        kv.store(0, pos, k.data(), c.latent ? nullptr : v.data());
        const auto q = random_values(size_t(n_head * c.dk), uint32_t(77 + pos));
        const moe::AttentionSpan span{window > 0 ? std::max(0, pos - window + 1) : 0, nullptr};
        for (int32_t kvh = 0; kvh < c.n_kv; ++kvh) {
            const float *qg = q.data() + size_t(kvh * c.group * c.dk);
            moe::attend_kv_group(kv, 0, s, kvh, qg, pos, scores.data(), out.data(), span);
            for (int32_t g = 0; g < c.group; ++g) {
                moe::attend_head(kv, 0, s, kvh * c.group + g, qg + size_t(g * c.dk), pos, sc.data(), ref.data(),
                                 span);
                ASSERT_EQ(0, std::memcmp(ref.data(), out.data() + size_t(g * c.dv), ref.size() * sizeof(float)))
                    << "f32 " << f32 << " dk " << c.dk << " dv " << c.dv << " group " << c.group << " window "
                    << window << " pos " << pos << " kv head " << kvh << " head " << g;
            }
        }
    }
}

TEST(AttentionGroup, TiledPathEqualsPerHeadForEveryLayout) {
    const TileCase cases[] = {
        {2, 8, 128, 128, false},  // Qwen3-30B-A3B's heads
        {4, 1, 64, 64, false},    // one query head per KV head
        {2, 7, 64, 72, false},    // groups of 4 + 2 + 1 (scores), 4 + 1 + 1 + 1 (values); 72 = 64 + 8 elements
        {1, 16, 576, 512, true},  // latent attention, keys only
        {1, 3, 576, 512, true},
        // The wide path's blocks: scores 8 + 4 + 1, values 8 + 4 + 1 heads
        // over 32 + 16 elements; scores 16 + 8, values three times 8 heads
        // over 32 + 8 elements; two heads (one at a time over 128 + 16); four.
        {1, 13, 64, 48, false},
        {1, 24, 32, 40, false},
        {2, 2, 16, 144, false},
        {2, 4, 128, 128, false},
    };
    const moe::test::IsaGuard guard;
    // AVX-512 takes the wide path, AVX2 the narrow one (each where the CPU has
    // it); both convert f16 rows with F16C, the scalar ISA portably.
    for (const moe::kernels::Isa isa :
         {moe::kernels::Isa::avx512, moe::kernels::Isa::avx2, moe::kernels::Isa::scalar}) {
        if (!moe::kernels::set_isa(isa)) continue;
        for (const bool f32 : {false, true})
            for (const TileCase &c : cases)
                for (const int32_t window : {0, 13, 20}) expect_tiled_equals_heads(f32, c, window);
    }
}

// Long contexts (62 wide tiles, then a last tile of 8, 7 or no keys) whose
// scores spread over about -60 .. +60, so the weights span 1 to the clamp of
// exp and the maximum is one score among a thousand, against attend_head on
// every path.
TEST(AttentionGroup, WideRangeOfWeightsOverLongContextsEqualsPerHead) {
    const int32_t n_ctx = 1000, n_kv = 1, group = 8, dk = 16, dv = 16;
    moe::KvCache kv(1, n_ctx, n_kv * dk, n_kv * dv, true);
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> spread(0.0f, 4.0f);
    for (int32_t p = 0; p < n_ctx; ++p) {
        auto k = random_values(size_t(dk), uint32_t(20 + p));
        const float size = spread(rng);  // scores from about -60 to +60
        for (float &x : k) x *= size;
        kv.store(0, p, k.data(), random_values(size_t(dv), uint32_t(2000 + p)).data());
    }
    const moe::AttentionShape s{group, n_kv, dk, dv, 1.0f};
    const auto q = random_values(size_t(group * dk), 4);
    std::vector<float> scores(size_t(group) * size_t(n_ctx)), out(size_t(group) * size_t(dv));
    std::vector<float> sc(static_cast<size_t>(n_ctx)), ref(static_cast<size_t>(dv));
    const moe::test::IsaGuard guard;
    for (const auto isa : {moe::kernels::Isa::avx512, moe::kernels::Isa::avx2, moe::kernels::Isa::scalar}) {
        if (!moe::kernels::set_isa(isa)) continue;
        for (const int32_t pos : {n_ctx - 1, n_ctx - 2, n_ctx - 9}) {
            moe::attend_kv_group(kv, 0, s, 0, q.data(), pos, scores.data(), out.data());
            for (int32_t g = 0; g < group; ++g) {
                moe::attend_head(kv, 0, s, g, q.data() + size_t(g * dk), pos, sc.data(), ref.data());
                ASSERT_EQ(0, std::memcmp(ref.data(), out.data() + size_t(g * dv), ref.size() * sizeof(float)))
                    << "isa " << moe::kernels::isa_name(isa) << " pos " << pos << " head " << g;
            }
        }
    }
}

// Each position's softmax weight is that of its own key's dot product: the
// values are one-hot (value p is 1 at element p), so output element p is the
// weight of position p, checked against scores computed in double from the
// cached keys. A key element moved to another key or element by the tile's
// transpose changes a score by about 1 and fails this by far.
void expect_own_key_weights(bool f32) {
    const int32_t n_ctx = 45, dk = 64, dv = 48, group = 3;
    const float scale = 0.125f;
    moe::KvCache kv(1, n_ctx, dk, dv, f32);
    std::vector<float> value(static_cast<size_t>(dv));
    for (int32_t p = 0; p < n_ctx; ++p) {
        std::fill(value.begin(), value.end(), 0.0f);
        value[size_t(p)] = 1.0f;
        kv.store(0, p, random_values(size_t(dk), uint32_t(300 + p)).data(), value.data());
    }
    const auto q = random_values(size_t(group * dk), 9);
    std::vector<float> scores(size_t(group * n_ctx)), out(size_t(group * dv));
    moe::attend_kv_group(kv, 0, {group, 1, dk, dv, scale}, 0, q.data(), n_ctx - 1, scores.data(), out.data());
    std::vector<float> key(static_cast<size_t>(dk));
    for (int32_t g = 0; g < group; ++g) {
        std::vector<double> w(static_cast<size_t>(n_ctx));
        for (int32_t p = 0; p < n_ctx; ++p) {
            kv.load_k(0, p, 0, dk, key.data());
            for (int32_t i = 0; i < dk; ++i) w[size_t(p)] += double(q[size_t(g * dk + i)]) * key[size_t(i)];
            w[size_t(p)] *= scale;
        }
        const double max = *std::max_element(w.begin(), w.end());
        double sum = 0.0;
        for (double &x : w) sum += (x = std::exp(x - max));
        for (int32_t p = 0; p < n_ctx; ++p)
            EXPECT_NEAR(w[size_t(p)] / sum, out[size_t(g * dv + p)], 1e-6)
                << "f32 " << f32 << " head " << g << " position " << p;
    }
}

TEST(AttentionGroup, EachPositionWeighsItsOwnKey) {
    const moe::test::IsaGuard guard;
    for (const auto isa : {moe::kernels::Isa::avx512, moe::kernels::Isa::avx2, moe::kernels::Isa::scalar}) {
        if (!moe::kernels::set_isa(isa)) continue;
        expect_own_key_weights(false);
        expect_own_key_weights(true);
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
