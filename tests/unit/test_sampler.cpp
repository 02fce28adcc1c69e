#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/error.hpp"
#include "runtime/sampler.hpp"
#include "support/sampler_params.hpp"
#include "support/status_of.hpp"

namespace {

using moe::test::status_of;
using moe::test::unfiltered;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> log_probs(const std::vector<double> &probs) {
    std::vector<float> l;
    for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
    return l;
}

// Relative frequency of each id over n draws.
std::vector<double> frequencies(moe::Sampler &s, const std::vector<float> &logits, int n) {
    std::vector<double> f(logits.size(), 0.0);
    for (int i = 0; i < n; ++i) {
        int32_t t = s.sample(logits);
        EXPECT_GE(t, 0);
        EXPECT_LT(t, static_cast<int32_t>(logits.size()));
        f[static_cast<size_t>(t)] += 1.0 / n;
    }
    return f;
}

}  // namespace

TEST(Xoshiro256, SeedsThroughSplitmix64) {
    moe::Xoshiro256 r(0);
    // splitmix64 from seed 0: its first four outputs.
    moe::Xoshiro256::State want = {0xe220a8397b1dcdafull, 0x6e789e6aa1b965f4ull, 0x06c45d188009454full,
                                   0xf88bb8a8724c81ecull};
    EXPECT_EQ(r.state(), want);
}

TEST(Xoshiro256, MatchesThePublishedSequence) {
    moe::Xoshiro256 r;
    r.set_state({1, 2, 3, 4});
    EXPECT_EQ(r.next(), 11520ull);
    EXPECT_EQ(r.next(), 0ull);
    EXPECT_EQ(r.next(), 1509978240ull);
    EXPECT_EQ(r.next(), 1215971899390074240ull);
}

TEST(Xoshiro256, RejectsAllZeroStateAndUnitIsHalfOpen) {
    moe::Xoshiro256 r(7);
    EXPECT_EQ(status_of([&] { r.set_state({0, 0, 0, 0}); }), moe::Status::invalid_argument);
    for (int i = 0; i < 10000; ++i) {
        double u = r.next_unit();
        ASSERT_GE(u, 0.0);
        ASSERT_LT(u, 1.0);
    }
}

TEST(Sampler, GreedyIsArgmaxWithLowestIdOnTies) {
    moe::Sampler s(unfiltered(0.0f));
    EXPECT_EQ(s.sample(std::vector<float>{0.1f, 3.0f, -2.0f, 2.9f}), 1);
    EXPECT_EQ(s.sample(std::vector<float>{1.0f, 5.0f, 5.0f, 5.0f}), 1);
    EXPECT_EQ(s.sample(std::vector<float>{-7.0f}), 0);
}

TEST(Sampler, TopKOneIsArgmaxAtAnyTemperature) {
    auto p = unfiltered(5.0f);
    p.top_k = 1;
    moe::Sampler s(p);
    std::vector<float> logits = {0.5f, 0.4f, 0.6f, 0.59f};
    for (int i = 0; i < 200; ++i) ASSERT_EQ(s.sample(logits), 2);
}

TEST(Sampler, InvalidParamsAreRejected) {
    auto bad = [](const char *field, auto edit) {
        auto p = unfiltered(1.0f);
        edit(p);
        moe::test::expect_invalid_params(p, field);
    };
    bad("temperature", [](moe::SamplerParams &p) { p.temperature = -0.1f; });
    bad("temperature", [](moe::SamplerParams &p) { p.temperature = kNaN; });
    bad("temperature", [](moe::SamplerParams &p) { p.temperature = kInf; });
    bad("top_k", [](moe::SamplerParams &p) { p.top_k = -1; });
    bad("top_p", [](moe::SamplerParams &p) { p.top_p = 0.0f; });
    bad("top_p", [](moe::SamplerParams &p) { p.top_p = 1.5f; });
    bad("top_p", [](moe::SamplerParams &p) { p.top_p = kNaN; });
    bad("min_p", [](moe::SamplerParams &p) { p.min_p = -0.01f; });
    bad("min_p", [](moe::SamplerParams &p) { p.min_p = 1.01f; });
    bad("min_p", [](moe::SamplerParams &p) { p.min_p = kNaN; });
    EXPECT_NO_THROW(moe::Sampler s(moe::SamplerParams{}));  // the defaults are valid
}

TEST(Sampler, NaNIsNeverPickedAndInfWins) {
    moe::Sampler s(unfiltered(1.0f));
    std::vector<float> logits = {kNaN, 0.0f, kNaN, 0.0f, -kInf};
    for (int i = 0; i < 500; ++i) {
        int32_t t = s.sample(logits);
        ASSERT_TRUE(t == 1 || t == 3) << t;
    }
    EXPECT_EQ(s.sample(std::vector<float>{0.0f, kInf, kNaN, kInf}), 1);
    moe::Sampler greedy(unfiltered(0.0f));
    EXPECT_EQ(greedy.sample(std::vector<float>{kNaN, -1.0f, kNaN}), 1);
}

// The contract in moestream.h: +inf wins outright, also in a row with no
// finite logit at all, without drawing from the generator.
TEST(Sampler, PlusInfIsPickedEvenWithoutAFiniteLogit) {
    for (float temperature : {0.0f, 0.7f}) {
        moe::Sampler s(unfiltered(temperature));
        const moe::Xoshiro256::State before = s.rng().state();
        EXPECT_EQ(s.sample(std::vector<float>{kInf, kNaN}), 0);
        EXPECT_EQ(s.sample(std::vector<float>{kInf, kInf}), 0);
        EXPECT_EQ(s.sample(std::vector<float>{kNaN, -kInf, kInf, kInf}), 2);
        EXPECT_EQ(s.rng().state(), before);
    }
}

TEST(Sampler, RowsWithNothingToPickAreErrors) {
    moe::Sampler s(unfiltered(1.0f));
    EXPECT_EQ(status_of([&] { s.sample(std::vector<float>{kNaN, kNaN}); }), moe::Status::invalid_argument);
    EXPECT_EQ(status_of([&] { s.sample(std::vector<float>{-kInf, kNaN}); }), moe::Status::invalid_argument);
    EXPECT_EQ(status_of([&] { s.sample(std::span<const float>()); }), moe::Status::invalid_argument);
}

TEST(Sampler, FrequenciesFollowSoftmax) {
    moe::Sampler s(unfiltered(1.0f, 42));
    std::vector<double> probs = {0.1, 0.2, 0.3, 0.4};
    auto f = frequencies(s, log_probs(probs), 40000);
    for (size_t i = 0; i < probs.size(); ++i) EXPECT_NEAR(f[i], probs[i], 0.015) << "id " << i;
}

TEST(Sampler, TemperatureSharpens) {
    // softmax(log p / 0.5) is proportional to p^2: 1, 4, 9, 16 over 30.
    moe::Sampler s(unfiltered(0.5f, 3));
    auto f = frequencies(s, log_probs({0.1, 0.2, 0.3, 0.4}), 40000);
    const double want[] = {1 / 30.0, 4 / 30.0, 9 / 30.0, 16 / 30.0};
    for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(f[i], want[i], 0.015) << "id " << i;
}

TEST(Sampler, TopKKeepsTheMostLikely) {
    auto p = unfiltered(1.0f, 5);
    p.top_k = 2;
    moe::Sampler s(p);
    auto f = frequencies(s, log_probs({0.1, 0.4, 0.2, 0.3}), 40000);
    EXPECT_EQ(f[0], 0.0);
    EXPECT_EQ(f[2], 0.0);
    EXPECT_NEAR(f[1], 4 / 7.0, 0.015);
    EXPECT_NEAR(f[3], 3 / 7.0, 0.015);
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
    auto p = unfiltered(1.0f, 6);
    p.top_p = 0.6f;  // 0.4 < 0.6 <= 0.4 + 0.3
    moe::Sampler s(p);
    auto f = frequencies(s, log_probs({0.1, 0.2, 0.3, 0.4}), 40000);
    EXPECT_EQ(f[0], 0.0);
    EXPECT_EQ(f[1], 0.0);
    EXPECT_NEAR(f[2], 3 / 7.0, 0.015);
    EXPECT_NEAR(f[3], 4 / 7.0, 0.015);
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheBest) {
    auto p = unfiltered(1.0f, 7);
    p.min_p = 0.45f;  // keeps p >= 0.18
    moe::Sampler s(p);
    auto f = frequencies(s, log_probs({0.1, 0.2, 0.3, 0.4, 0.0001}), 40000);
    EXPECT_EQ(f[0], 0.0);
    EXPECT_EQ(f[4], 0.0);
    EXPECT_NEAR(f[1], 2 / 9.0, 0.015);
    EXPECT_NEAR(f[2], 3 / 9.0, 0.015);
    EXPECT_NEAR(f[3], 4 / 9.0, 0.015);
}

TEST(Sampler, SameSeedSameSequenceOtherSeedOtherSequence) {
    std::vector<float> logits(1000);
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(std::sin(i * 0.37) * 3.0);
    moe::SamplerParams p;  // the defaults, all filters on
    p.seed = 99;
    moe::Sampler a(p), b(p);
    p.seed = 100;
    moe::Sampler c(p);
    int differ = 0;
    for (int i = 0; i < 200; ++i) {
        int32_t ta = a.sample(logits);
        ASSERT_EQ(ta, b.sample(logits));
        differ += ta != c.sample(logits);
    }
    EXPECT_GT(differ, 0);
}

TEST(Sampler, TopPOnALargeFlatVocabularyKeepsTheWholeNucleus) {
    // A nucleus of thousands of tokens: the sampler must grow its sorted
    // prefix past its first guess rather than truncate it.
    const size_t n_vocab = 4000;
    std::vector<float> logits(n_vocab);
    for (size_t i = 0; i < n_vocab; ++i) logits[i] = static_cast<float>(std::sin(i * 12.9898) * 0.5);
    auto p = unfiltered(1.0f, 21);
    p.top_p = 0.9f;
    moe::Sampler s(p);

    // Reference nucleus: full sort, smallest prefix with mass >= 0.9 (+1 for rounding at the edge).
    std::vector<int32_t> order(n_vocab);
    for (size_t i = 0; i < n_vocab; ++i) order[i] = static_cast<int32_t>(i);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    double total = 0.0;
    for (float l : logits) total += std::exp(static_cast<double>(l) - logits[order[0]]);
    std::vector<int> rank(n_vocab);
    double mass = 0.0;
    size_t nucleus = 0;
    for (; nucleus < n_vocab && mass < 0.9 * total; ++nucleus)
        mass += std::exp(static_cast<double>(logits[order[nucleus]]) - logits[order[0]]);
    for (size_t r = 0; r < n_vocab; ++r) rank[static_cast<size_t>(order[r])] = static_cast<int>(r);
    ASSERT_GT(nucleus, 1000u);

    int max_rank = 0;
    for (int i = 0; i < 3000; ++i) {
        const int r = rank[static_cast<size_t>(s.sample(logits))];
        ASSERT_LE(r, static_cast<int>(nucleus)) << "sampled outside the nucleus";
        max_rank = std::max(max_rank, r);
    }
    EXPECT_GT(max_rank, static_cast<int>(nucleus * 9 / 10));
}
