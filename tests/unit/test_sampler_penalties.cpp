// Repetition penalties: each penalty (positive and negative) against a direct
// computation of the penalised row, the window dropping old tokens or
// spanning the whole history, fed (accept) and drawn history, penalties off
// leaving sampling exactly as before, reset, and invalid parameters.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "runtime/sampler.hpp"
#include "support/sampler_params.hpp"
#include "support/status_of.hpp"

namespace {

using moe::test::status_of;
using moe::test::unfiltered;

moe::SamplerParams greedy_with(float repeat, float presence, float frequency, int32_t last_n) {
    moe::SamplerParams p;
    p.temperature = 0.0f;
    p.repeat_penalty = repeat;
    p.presence_penalty = presence;
    p.frequency_penalty = frequency;
    p.penalty_last_n = last_n;
    return p;
}

// The penalised row as the documented rule gives it, computed here from the
// last `penalty_last_n` tokens of `history` (all of them for -1; the tests'
// histories are far shorter than the largest window), independently of the
// sampler.
std::vector<float> penalised(std::vector<float> row, const std::deque<int32_t> &history, const moe::SamplerParams &p) {
    std::map<int32_t, uint32_t> counts;
    const size_t window = p.penalty_last_n == -1 ? history.size() : size_t(p.penalty_last_n);
    const size_t first = history.size() > window ? history.size() - window : 0;
    for (size_t i = first; i < history.size(); ++i) ++counts[history[i]];
    for (const auto &[id, c] : counts) {
        if (size_t(id) >= row.size()) continue;
        float &l = row[size_t(id)];
        l = l > 0.0f ? l / p.repeat_penalty : l * p.repeat_penalty;
        l = l - (float(c) * p.frequency_penalty + p.presence_penalty);
    }
    return row;
}

}  // namespace

TEST(SamplerPenalties, RepeatDividesPositiveAndMultipliesNegativeLogits) {
    // Token 0 was seen. Dividing 2 by 2 gives 1 < 1.5; multiplying would give 4.
    moe::Sampler pos(greedy_with(2.0f, 0, 0, 8));
    pos.accept(std::vector<int32_t>{0});
    EXPECT_EQ(pos.sample(std::vector<float>{2.0f, 1.5f}), 1);
    // -1 times 2 is -2 < -1.5; dividing would give -0.5.
    moe::Sampler neg(greedy_with(2.0f, 0, 0, 8));
    neg.accept(std::vector<int32_t>{0});
    EXPECT_EQ(neg.sample(std::vector<float>{-1.0f, -1.5f}), 1);
    // A penalty below 1 favours seen tokens, by the same rule.
    moe::Sampler favour(greedy_with(0.5f, 0, 0, 8));
    favour.accept(std::vector<int32_t>{0});
    EXPECT_EQ(favour.sample(std::vector<float>{-1.0f, -1.5f}), 0);  // -0.5
    EXPECT_EQ(favour.sample(std::vector<float>{1.0f, 1.5f}), 0);    // 2 (0 is seen twice now: still once)
}

TEST(SamplerPenalties, PresenceCountsOnceFrequencyCountsEachOccurrence) {
    const std::vector<float> row = {3.0f, 2.0f, 0.0f};
    const std::vector<int32_t> seen = {0, 0, 0};
    // Presence 0.5 once: 2.5 > 2. Counted three times it would be 1.5.
    moe::Sampler presence(greedy_with(1.0f, 0.5f, 0, 8));
    presence.accept(seen);
    EXPECT_EQ(presence.sample(row), 0);
    // Frequency 0.4 three times: 1.8 < 2. Counted once it would be 2.6.
    moe::Sampler frequency(greedy_with(1.0f, 0, 0.4f, 8));
    frequency.accept(seen);
    EXPECT_EQ(frequency.sample(row), 1);
    // Both: 3 - (3 * 0.2 + 0.3) = 2.1 > 2; 3 - 3 * (0.2 + 0.3) = 1.5 would not be.
    moe::Sampler both(greedy_with(1.0f, 0.3f, 0.2f, 8));
    both.accept(seen);
    EXPECT_EQ(both.sample(row), 0);
}

TEST(SamplerPenalties, TheWindowDropsOlderTokens) {
    // Window 2 over 0, 1, 2: token 0 has left it and keeps its 1.0.
    moe::Sampler s(greedy_with(1.0f, 0.5f, 0, 2));
    s.accept(std::vector<int32_t>{0, 1, 2});
    EXPECT_EQ(s.history().size(), 2u);
    EXPECT_EQ(s.sample(std::vector<float>{1.0f, 1.0f, 1.0f, 0.9f}), 0);
    // A window of 3 still holds it: 0.9 is then the best.
    moe::Sampler wide(greedy_with(1.0f, 0.5f, 0, 3));
    wide.accept(std::vector<int32_t>{0, 1, 2});
    EXPECT_EQ(wide.sample(std::vector<float>{1.0f, 1.0f, 1.0f, 0.9f}), 3);
}

TEST(SamplerPenalties, DrawnTokensAreRecordedAfterAcceptedOnes) {
    // Greedy with presence 0.5 over {1, 0.9, 0.8}: each draw penalises itself,
    // so the picks rotate once every token has been seen.
    moe::Sampler s(greedy_with(1.0f, 0.5f, 0, 2));
    const std::vector<float> row = {1.0f, 0.9f, 0.8f};
    s.accept(std::vector<int32_t>{1});
    EXPECT_EQ(s.sample(row), 0);  // 1 seen: 1.0, 0.4, 0.8
    EXPECT_EQ(s.sample(row), 2);  // 1, 0 seen: 0.5, 0.4, 0.8
    EXPECT_EQ(s.sample(row), 1);  // 0, 2 seen (1 left the window): 0.5, 0.9, 0.3
    ASSERT_EQ(s.history().size(), 2u);
    EXPECT_EQ(s.history().oldest(0), 2);
    EXPECT_EQ(s.history().oldest(1), 1);
}

TEST(SamplerPenalties, DrawsMatchTheDirectComputationOnEveryStep) {
    // A penalised sampler and an unpenalised one with the same seed, fed the
    // row penalised here by the documented rule, draw the same tokens: every
    // row of 300 steps must be bit-identical for the generators to stay in step.
    // Positive penalties, negative ones (favouring seen tokens), mixed signs,
    // and the whole history as the window.
    struct Rule {
        float repeat, presence, frequency;
        int32_t last_n;
    };
    for (const Rule r : {Rule{1.7f, 0.35f, 0.6f, 6}, Rule{1.7f, -0.35f, -0.6f, 6}, Rule{0.8f, 0.4f, -0.3f, -1},
                         Rule{1.3f, -0.5f, 0.25f, -1}}) {
        SCOPED_TRACE(::testing::Message() << "repeat " << r.repeat << " presence " << r.presence << " frequency "
                                          << r.frequency << " last_n " << r.last_n);
        moe::SamplerParams p = unfiltered(1.0f, 42);
        p.repeat_penalty = r.repeat;
        p.presence_penalty = r.presence;
        p.frequency_penalty = r.frequency;
        p.penalty_last_n = r.last_n;
        moe::Sampler penalising(p), plain(unfiltered(1.0f, 42));
        std::vector<float> row(12);
        for (size_t i = 0; i < row.size(); ++i) row[i] = float(std::sin(double(i) * 1.3) * 2.0);  // both signs
        const std::vector<int32_t> prompt = {3, 3, 7, 40, 3};  // 40 is beyond the row: skipped
        penalising.accept(prompt);
        std::deque<int32_t> history(prompt.begin(), prompt.end());
        int distinct_rows = 0;
        for (int step = 0; step < 300; ++step) {
            const std::vector<float> want = penalised(row, history, p);
            distinct_rows += want != row;
            const int32_t t = penalising.sample(row);
            ASSERT_EQ(t, plain.sample(want)) << "step " << step;
            history.push_back(t);
        }
        EXPECT_EQ(distinct_rows, 300);
    }
}

TEST(SamplerPenalties, NegativePresenceAndFrequencyFavourSeenTokens) {
    const std::vector<float> row = {1.0f, 0.8f};
    const std::vector<int32_t> seen = {1, 1};
    // Presence -0.3 once: 1.1 > 1. Not applied, 0 would win.
    moe::Sampler presence(greedy_with(1.0f, -0.3f, 0, 8));
    presence.accept(seen);
    EXPECT_EQ(presence.sample(row), 1);
    // Frequency -0.15 twice: 1.1 > 1. Counted once it would be 0.95.
    moe::Sampler frequency(greedy_with(1.0f, 0, -0.15f, 8));
    frequency.accept(seen);
    EXPECT_EQ(frequency.sample(row), 1);
    // A negative presence against a positive frequency: 0.8 - (2 * 0.2 - 0.5) = 0.9 < 1.
    moe::Sampler mixed(greedy_with(1.0f, -0.5f, 0.2f, 8));
    mixed.accept(seen);
    EXPECT_EQ(mixed.sample(row), 0);
}

TEST(SamplerPenalties, APenaltyBeyondFloatRangeGivesInfinityWhichIsPicked) {
    // -1 - 2 * -3e38 overflows to +inf: picked outright, as any +inf logit,
    // without drawing from the generator.
    moe::SamplerParams p = unfiltered(1.0f, 9);
    p.frequency_penalty = -3e38f;
    moe::Sampler s(p);
    s.accept(std::vector<int32_t>{2, 2});
    const moe::Xoshiro256::State before = s.rng().state();
    EXPECT_EQ(s.sample(std::vector<float>{5.0f, 4.0f, -1.0f}), 2);
    EXPECT_EQ(s.rng().state(), before);
}

TEST(SamplerPenalties, WholeHistoryWindowCountsEveryTokenUpToTheLargestWindow) {
    // Token 0, then 100 others: a window of 64 has let 0 go, the whole history has not.
    std::vector<int32_t> seen = {0};
    for (int32_t i = 0; i < 100; ++i) seen.push_back(2 + i);
    const std::vector<float> row = {1.0f, 0.9f};
    moe::Sampler window(greedy_with(1.0f, 0.5f, 0, 64)), whole(greedy_with(1.0f, 0.5f, 0, -1));
    window.accept(seen);
    whole.accept(seen);
    EXPECT_EQ(window.sample(row), 0);
    EXPECT_EQ(whole.sample(row), 1);
    // The ring was sized at construction for the largest window; past it the oldest tokens drop out.
    moe::Sampler full(greedy_with(1.0f, 0.5f, 0, -1));
    EXPECT_EQ(full.history().capacity(), size_t(moe::kMaxPenaltyLastN));
    std::vector<int32_t> many(size_t(moe::kMaxPenaltyLastN) + 1);
    for (size_t i = 0; i < many.size(); ++i) many[i] = int32_t(i);
    full.accept(many);
    EXPECT_EQ(full.history().size(), size_t(moe::kMaxPenaltyLastN));
    EXPECT_EQ(full.history().oldest(0), 1);
    EXPECT_EQ(full.sample(std::vector<float>{1.0f, 1.2f}), 0);  // 0 has left the window (1.0), 1 has not (0.7)
}

TEST(SamplerPenalties, PenaltiesOffSampleExactlyAsBefore) {
    // Off values with a full history, or a window of 0 with penalties set,
    // leave every draw as a sampler without any history makes.
    std::vector<float> row(500);
    for (size_t i = 0; i < row.size(); ++i) row[i] = float(std::sin(double(i) * 0.37) * 3.0);
    moe::SamplerParams defaults;
    defaults.seed = 7;
    moe::SamplerParams no_window = defaults;
    no_window.repeat_penalty = 1.5f;
    no_window.presence_penalty = 1.0f;
    no_window.penalty_last_n = 0;
    for (const moe::SamplerParams &p : {defaults, no_window}) {
        moe::Sampler fed(p), fresh(defaults);
        std::vector<int32_t> seen(64);
        for (size_t i = 0; i < seen.size(); ++i) seen[i] = int32_t(i * 3);
        fed.accept(seen);
        for (int i = 0; i < 200; ++i) ASSERT_EQ(fed.sample(row), fresh.sample(row)) << i;
    }
    // The caller's row is never written, penalties on or off.
    moe::SamplerParams on = defaults;
    on.repeat_penalty = 3.0f;
    moe::Sampler s(on);
    s.accept(std::vector<int32_t>{0, 1, 2});
    const std::vector<float> before = row;
    s.sample(row);
    EXPECT_EQ(std::memcmp(row.data(), before.data(), row.size() * sizeof(float)), 0);
}

TEST(SamplerPenalties, AcceptRefusesNegativeIdsRecordingNothing) {
    moe::Sampler s(greedy_with(1.2f, 0, 0, 8));
    s.accept(std::vector<int32_t>{4, 5});
    std::string msg;
    EXPECT_EQ(status_of([&] { s.accept(std::vector<int32_t>{6, -1, 7}); }, &msg), moe::Status::invalid_argument);
    EXPECT_NE(msg.find("-1"), std::string::npos) << msg;
    ASSERT_EQ(s.history().size(), 2u);
    EXPECT_EQ(s.history().oldest(1), 5);
    s.accept({});  // nothing to record is fine
    EXPECT_EQ(s.history().size(), 2u);
}

TEST(SamplerPenalties, ResetForgetsTheHistoryAndRestartsTheGenerator) {
    moe::SamplerParams p = unfiltered(1.0f, 5);
    p.frequency_penalty = 0.8f;
    p.penalty_last_n = 4;
    moe::Sampler s(p);
    const std::vector<float> row = {0.5f, 0.1f, -0.2f, 0.4f, 0.0f};
    std::vector<int32_t> first, again;
    for (int i = 0; i < 50; ++i) first.push_back(s.sample(row));
    s.reset();
    EXPECT_TRUE(s.history().empty());
    for (int i = 0; i < 50; ++i) again.push_back(s.sample(row));
    EXPECT_EQ(first, again);
}

TEST(SamplerPenalties, InvalidValuesAreRefusedNamingTheField) {
    constexpr float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    for (float bad : {0.0f, -0.0f, -1.0f, nan, inf, -inf}) moe::test::expect_invalid_params(greedy_with(bad, 0, 0, 8), "repeat_penalty");
    for (float bad : {nan, inf, -inf}) moe::test::expect_invalid_params(greedy_with(1, bad, 0, 8), "presence_penalty");
    for (float bad : {nan, inf, -inf}) moe::test::expect_invalid_params(greedy_with(1, 0, bad, 8), "frequency_penalty");
    for (int32_t bad : {-2, std::numeric_limits<int32_t>::min(), moe::kMaxPenaltyLastN + 1,
                        std::numeric_limits<int32_t>::max()})
        moe::test::expect_invalid_params(greedy_with(1, 0, 0, bad), "penalty_last_n");
    EXPECT_NO_THROW(moe::Sampler(greedy_with(1, 0, 0, moe::kMaxPenaltyLastN)));
    EXPECT_NO_THROW(moe::Sampler(greedy_with(1, 0, 0, 0)));
    EXPECT_NO_THROW(moe::Sampler(greedy_with(1, 0, 0, -1)));
    EXPECT_NO_THROW(moe::Sampler(greedy_with(1e-30f, -1e30f, -0.1f, 8)));  // negative penalties are a choice
}
