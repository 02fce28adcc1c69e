// Routing variants of route_experts against the rule written out directly:
// softmax or sigmoid gating, a bias that only steers the selection, the
// group limit (groups scored by their two best experts), renormalisation and
// scaling of the selected weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "model/router.hpp"

namespace {

struct Routed {
    std::vector<int32_t> ids;
    std::vector<double> w;
};

// The rule in double precision with a full sort (stable: ties to the lower id).
Routed direct_route(const moe::GatingSpec &spec, const std::vector<float> &logits, const std::vector<float> &bias,
                    int32_t k) {
    const size_t n = logits.size();
    std::vector<double> p(n);
    if (spec.func == moe::GatingFunc::sigmoid) {
        for (size_t i = 0; i < n; ++i) p[i] = 1.0 / (1.0 + std::exp(-double(logits[i])));
    } else {
        const double max = *std::max_element(logits.begin(), logits.end());
        double sum = 0;
        for (size_t i = 0; i < n; ++i) sum += (p[i] = std::exp(double(logits[i]) - max));
        for (double &v : p) v /= sum;
    }
    std::vector<double> sel(p);
    if (!bias.empty())
        for (size_t i = 0; i < n; ++i) sel[i] += bias[i];
    if (spec.n_group > 1) {
        const size_t per = n / size_t(spec.n_group);
        std::vector<std::pair<double, int32_t>> groups;
        for (int32_t g = 0; g < spec.n_group; ++g) {
            std::vector<double> s(sel.begin() + long(size_t(g) * per), sel.begin() + long(size_t(g + 1) * per));
            std::sort(s.rbegin(), s.rend());
            groups.push_back({s[0] + (per > 1 ? s[1] : 0.0), g});
        }
        std::stable_sort(groups.begin(), groups.end(), [](auto a, auto b) { return a.first > b.first; });
        for (size_t r = size_t(spec.n_group_used); r < groups.size(); ++r)
            for (size_t i = 0; i < per; ++i) sel[size_t(groups[r].second) * per + i] = -INFINITY;
    }
    std::vector<int32_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return sel[size_t(a)] > sel[size_t(b)]; });
    Routed r;
    for (int32_t s = 0; s < k; ++s) {
        r.ids.push_back(order[size_t(s)]);
        r.w.push_back(p[size_t(order[size_t(s)])]);
    }
    if (spec.norm_weights) {
        const double sum = std::accumulate(r.w.begin(), r.w.end(), 0.0);
        for (double &v : r.w) v /= std::max(sum, 6.103515625e-5);
    }
    if (spec.weights_scale != 0.0f && spec.weights_scale != 1.0f)
        for (double &v : r.w) v *= spec.weights_scale;
    return r;
}

// Logits spread widely enough that float rounding never reorders them.
std::vector<float> spread_logits(size_t n, std::mt19937 &rng) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = -3.0f + 6.0f * float(i) / float(n);
    std::shuffle(v.begin(), v.end(), rng);
    return v;
}

void expect_routes_like_the_rule(const moe::GatingSpec &spec, bool with_bias, uint32_t seed) {
    std::mt19937 rng(seed);
    const int32_t n = 32, k = 6;
    moe::RouterScratch scratch(n, spec.n_group);
    for (int round = 0; round < 50; ++round) {
        const std::vector<float> logits = spread_logits(size_t(n), rng);
        std::vector<float> bias;
        if (with_bias) {
            std::uniform_real_distribution<float> d(-0.3f, 0.3f);
            for (int32_t i = 0; i < n; ++i) bias.push_back(d(rng));
        }
        const Routed want = direct_route(spec, logits, bias, k);
        std::vector<float> x(logits);
        std::vector<int32_t> ids(static_cast<size_t>(k));
        std::vector<float> w(static_cast<size_t>(k));
        moe::route_experts(spec, x.data(), with_bias ? bias.data() : nullptr, n, k, ids.data(), w.data(), scratch);
        ASSERT_EQ(ids, want.ids) << "round " << round;
        for (int32_t s = 0; s < k; ++s) EXPECT_NEAR(w[size_t(s)], want.w[size_t(s)], 2e-6) << "round " << round;
    }
}

TEST(RouterGating, SoftmaxWithoutNormIsTheProbabilities) {
    expect_routes_like_the_rule(moe::GatingSpec{}, false, 1);
}

TEST(RouterGating, SoftmaxScaledWeights) {
    moe::GatingSpec s;
    s.weights_scale = 2.5f;
    expect_routes_like_the_rule(s, false, 2);
}

TEST(RouterGating, SigmoidWithSelectionBiasNormAndScale) {
    moe::GatingSpec s;
    s.func = moe::GatingFunc::sigmoid;
    s.norm_weights = true;
    s.weights_scale = 2.827f;
    expect_routes_like_the_rule(s, true, 3);
}

TEST(RouterGating, GroupLimitedByTopTwoSums) {
    moe::GatingSpec s;
    s.func = moe::GatingFunc::sigmoid;
    s.norm_weights = true;
    s.n_group = 8;
    s.n_group_used = 3;
    expect_routes_like_the_rule(s, true, 4);
    s.n_group = 4;
    s.n_group_used = 1;
    expect_routes_like_the_rule(s, false, 5);
}

// The bias moves the choice, never the weight: a low-probability expert with
// a large bias is chosen and weighted by its own probability.
TEST(RouterGating, BiasSelectsButDoesNotWeigh) {
    moe::GatingSpec s;
    s.func = moe::GatingFunc::sigmoid;
    std::vector<float> logits = {2.0f, 1.0f, -1.0f, 0.0f};
    const std::vector<float> bias = {0.0f, 0.0f, 5.0f, 0.0f};
    moe::RouterScratch scratch(4, 1);
    int32_t ids[2];
    float w[2];
    moe::route_experts(s, logits.data(), bias.data(), 4, 2, ids, w, scratch);
    EXPECT_EQ(ids[0], 2);
    EXPECT_EQ(ids[1], 0);
    EXPECT_FLOAT_EQ(w[0], 1.0f / (1.0f + std::exp(1.0f)));
    EXPECT_FLOAT_EQ(w[1], 1.0f / (1.0f + std::exp(-2.0f)));
}

// Only experts of the kept groups are chosen, even when a dropped group holds
// the single best expert (its second expert is poor).
TEST(RouterGating, GroupWithOneStrongExpertLosesToTwoGoodOnes) {
    moe::GatingSpec s;
    s.n_group = 2;
    s.n_group_used = 1;
    std::vector<float> logits = {5.0f, -5.0f, 4.8f, 4.8f};
    moe::RouterScratch scratch(4, 2);
    int32_t ids[2];
    float w[2];
    moe::route_experts(s, logits.data(), nullptr, 4, 2, ids, w, scratch);
    EXPECT_EQ(ids[0], 2);
    EXPECT_EQ(ids[1], 3);
}

}  // namespace
