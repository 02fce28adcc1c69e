// The reuse-aware policy: ranks by the probability of use at the layer's next
// visit, learns the layer period, beats LRU / LFU on traces with real models'
// statistics and stays near Belady on them (the invariants every policy keeps
// are checked in test_cache_policy.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <unordered_set>

#include "experts/cache_policy.hpp"
#include "experts/trace_replay.hpp"
#include "experts/trace_synth.hpp"
#include "support/paths.hpp"

namespace {

struct Blocked {
    std::unordered_set<uint32_t> keys;
    static bool evictable(void *ctx, uint32_t key) { return static_cast<Blocked *>(ctx)->keys.count(key) == 0; }
};

}  // namespace

TEST(ReuseAwarePolicy, KeepsLastVisitsKeysAndPopularOnesOverRareOnes) {
    // 4 layers x 8 experts; one tick per layer visit, period 4.
    moe::UsageProfile shape{4, 8, std::vector<uint64_t>(32, 0)};
    auto p = moe::make_cache_policy(moe::CachePolicyKind::reuse_aware, 32, 6, &shape);
    uint64_t tick = 0;
    // Key 0 (layer 0) is used at every token; key 1 (layer 0) once, long ago; key 9 (layer 1) was used one token ago.
    p->on_insert(1, 0);
    for (int token = 0; token < 200; ++token)
        for (uint32_t layer = 0; layer < 4; ++layer, ++tick) {
            if (layer == 0) token == 0 ? p->on_insert(0, tick) : p->on_hit(0, tick);
            if (layer == 1 && token == 199) p->on_insert(9, tick);
        }
    Blocked none;
    uint32_t v = ~0u;
    ASSERT_TRUE(p->choose_victim(&Blocked::evictable, &none, &v));
    EXPECT_EQ(v, 1u);
    Blocked keep1{{1}};
    ASSERT_TRUE(p->choose_victim(&Blocked::evictable, &keep1, &v));
    EXPECT_EQ(v, 9u);  // reuse probability ~0.4 is below key 0's, used every token
    Blocked only0{{1, 9}};
    ASSERT_TRUE(p->choose_victim(&Blocked::evictable, &only0, &v));
    EXPECT_EQ(v, 0u);
    Blocked all{{0, 1, 9}};
    EXPECT_FALSE(p->choose_victim(&Blocked::evictable, &all, &v));
}

TEST(ReuseAwarePolicy, RanksByFreshDrawsNotByRunsOfReuse) {
    // 1 layer x 8 experts, one visit per token. In 200 tokens key 1 is used 40
    // times in 4 runs of 10 consecutive tokens, key 2 33 times, every 6th
    // token. Neither was used at the latest visit. Key 2 is drawn afresh far
    // more often when not just used, so key 1 goes first although it was
    // used more often.
    moe::UsageProfile shape{1, 8, std::vector<uint64_t>(8, 0)};
    auto p = moe::make_cache_policy(moe::CachePolicyKind::reuse_aware, 8, 4, &shape);
    bool in1 = false, in2 = false;
    for (uint64_t tick = 1; tick <= 200; ++tick) {
        const uint64_t t = tick - 1;
        if (t % 50 < 10 && t < 200 - 1) in1 ? p->on_hit(1, tick) : p->on_insert(1, tick), in1 = true;
        if (t % 6 == 2 && t < 200 - 3) in2 ? p->on_hit(2, tick) : p->on_insert(2, tick), in2 = true;
        p->on_insert(3, tick);  // key 3 is used at every visit, so it is "just used" at the end
    }
    Blocked keep3{{3}};
    uint32_t v = ~0u;
    ASSERT_TRUE(p->choose_victim(&Blocked::evictable, &keep3, &v));
    EXPECT_EQ(v, 1u);
}

TEST(ReuseAwarePolicy, RankingSurvivesTheEpochMovingOn) {
    // Decayed counts are rebased every 256 half-lives (1024 tokens each); a
    // run much longer than that must keep ranking by the recent rates.
    moe::UsageProfile shape{1, 4, std::vector<uint64_t>(4, 0)};
    auto p = moe::make_cache_policy(moe::CachePolicyKind::reuse_aware, 4, 4, &shape);
    const uint64_t tokens = 600001;  // keys 0-2 not used at the last visit
    for (uint64_t tick = 1; tick <= tokens; ++tick) {
        // Key 0 every 3rd token, key 1 every 7th, key 2 every 2nd but not at the end, key 3 always.
        if (tick % 3 == 0) p->on_insert(0, tick);
        if (tick % 7 == 0) p->on_insert(1, tick);
        if (tick % 2 == 0 && tick + 8 < tokens) p->on_insert(2, tick);
        p->on_insert(3, tick);
    }
    Blocked keep3{{3}};
    uint32_t v = ~0u;
    ASSERT_TRUE(p->choose_victim(&Blocked::evictable, &keep3, &v));
    EXPECT_EQ(v, 1u);
    Blocked keep1and3{{1, 3}};
    ASSERT_TRUE(p->choose_victim(&Blocked::evictable, &keep1and3, &v));
    EXPECT_EQ(v, 0u);
}

TEST(ReuseAwarePolicy, AReadAheadIsKeptUntilItsLayerRunsButIsNotAUse) {
    // 2 layers x 4 experts: layer 0 runs at odd ticks, layer 1 at even ones.
    moe::UsageProfile shape{2, 4, std::vector<uint64_t>(8, 0)};
    auto p = moe::make_cache_policy(moe::CachePolicyKind::reuse_aware, 8, 8, &shape);
    uint64_t tick = 0;
    Blocked keep1{{1}};
    uint32_t v = ~0u;
    for (int token = 0; token < 100; ++token) {
        ++tick;  // layer 0: key 1 every token, key 3 every 4th
        token == 0 ? p->on_insert(1, tick) : p->on_hit(1, tick);
        if (token % 4 == 0) p->on_insert(3, tick);
        ++tick;  // layer 1: a hint for layer 0 reads key 2 ahead; layer 0 never asks for it
        p->on_prefetch(2, tick);
        ASSERT_TRUE(p->choose_victim(&Blocked::evictable, &keep1, &v));
        EXPECT_EQ(v, 3u) << "a pending read-ahead went before a rarely used key, token " << token;
    }
    ++tick;  // layer 0 runs without key 2: now it is the least likely
    p->on_hit(1, tick);
    ASSERT_TRUE(p->choose_victim(&Blocked::evictable, &keep1, &v));
    EXPECT_EQ(v, 2u);
}

TEST(ReuseAwarePolicy, LearnsThePeriodWithoutAProfile) {
    moe::SynthConfig c;
    c.n_layer = 8;
    c.n_expert = 32;
    c.n_expert_used = 4;
    c.n_tokens = 800;
    c.skew = 0.7;
    moe::RoutingTrace t = moe::synthesize_trace(c);
    // replay_policy passes a profile with the shape; compare with a policy
    // that has to learn the period.
    const uint32_t capacity = 64;
    auto with_shape = moe::replay_policy(t, moe::CachePolicyKind::reuse_aware, capacity, 400);
    auto policy = moe::make_cache_policy(moe::CachePolicyKind::reuse_aware, 256, capacity, nullptr);
    const auto learned = moe::replay_with(t, *policy, capacity, 400);
    EXPECT_NEAR(double(learned.hits), double(with_shape.hits), 0.02 * double(with_shape.accesses));
}

TEST(ReuseAwarePolicy, BeatsLruAndLfuOnRealisticTraces) {
    moe::SynthConfig c;
    c.n_layer = 12;
    c.n_expert = 128;
    c.n_expert_used = 8;
    c.n_tokens = 1200;
    c.reuse = 0.4;
    c.skew = 0.7;
    c.bytes_per_expert = 1;
    moe::RoutingTrace t = moe::synthesize_trace(c);
    const uint32_t n_keys = c.n_layer * c.n_expert;
    for (double share : {0.25, 0.5, 0.75}) {
        const uint32_t capacity = static_cast<uint32_t>(share * n_keys);
        const auto reuse = moe::replay_policy(t, moe::CachePolicyKind::reuse_aware, capacity, 600);
        const auto lru = moe::replay_policy(t, moe::CachePolicyKind::lru, capacity, 600);
        const auto lfu = moe::replay_policy(t, moe::CachePolicyKind::lfu_decay, capacity, 600);
        const auto best = moe::replay_belady(t, capacity, 600);
        EXPECT_GT(reuse.hits, lru.hits) << share;
        EXPECT_GT(reuse.hits, lfu.hits) << share;
        EXPECT_GE(reuse.hit_rate(), 0.85 * best.hit_rate()) << share;
    }
}

namespace {

// Least hit-rate ratios to Belady the default policy keeps at 25%, 50% and 75%
// of the expert bytes.
struct Floors {
    double at25, at50, at75;
};

// Default policy / Belady hit rates at 25%, 50% and 75% of the expert bytes,
// the second half of the trace measured after the first half warmed the cache.
void expect_near_belady(const moe::SynthConfig &c, const char *what, Floors floors) {
    const moe::RoutingTrace t = moe::synthesize_trace(c);
    const uint32_t n_keys = c.n_layer * c.n_expert;
    const uint64_t warmup = c.n_tokens / 2;
    for (double share : {0.25, 0.5, 0.75}) {
        const uint32_t capacity = static_cast<uint32_t>(share * n_keys);
        const auto policy = moe::replay_policy(t, moe::CachePolicyKind::reuse_aware, capacity, warmup);
        const auto best = moe::replay_belady(t, capacity, warmup);
        ASSERT_GT(best.hit_rate(), 0.0);
        const double ratio = policy.hit_rate() / best.hit_rate();
        const double floor = share < 0.3 ? floors.at25 : share < 0.6 ? floors.at50 : floors.at75;
        EXPECT_GE(ratio, floor) << what << " seed " << c.seed << " at " << share;
    }
}

}  // namespace

// The floors are what these traces allow an online policy, not the 90% target:
// on them a key's next use depends only on whether its layer's previous token
// used it and on its popularity, and the policy ranks by exactly that (the
// test below bounds its distance to the same rule fed the true popularity).
// With the synth default (top 20% of experts take 40% of routings) that rule
// itself reaches 83.0% / 88.6% / 94.2% of Belady (docs/performance.md).
TEST(ReuseAwarePolicy, StaysNearBeladyOnZipfSynthTraces) {
    for (uint64_t seed : {1, 2, 3}) {
        moe::SynthConfig c;  // reuse 0.4, Zipf 0.47 (top 20% take 40%), 128 experts, top-8
        c.n_layer = 12;
        c.n_tokens = 1200;
        c.bytes_per_expert = 1;
        c.seed = seed;
        expect_near_belady(c, "zipf 0.47", {0.82, 0.87, 0.93});
        c.skew = 0.7;  // top 20% take 52%
        expect_near_belady(c, "zipf 0.7", {0.875, 0.91, 0.95});
    }
}

TEST(ReuseAwarePolicy, StaysNearBeladyOnRealHeatSynthTraces) {
    const std::string shared = moe::test::shared_dir();
    const std::string heat = shared + "/reference/routing/qwen3-30b-a3b-heat.json";
    if (shared.empty() || !std::filesystem::exists(heat)) GTEST_SKIP() << "shared heat file absent";
    moe::SynthConfig c;
    moe::load_heat_file(heat, c);
    c.heat.resize(12);  // a slice of the model's layers keeps the test fast
    c.n_layer = 12;
    c.n_tokens = 1200;
    c.bytes_per_expert = 1;
    for (uint64_t seed : {1, 2}) {
        c.seed = seed;
        expect_near_belady(c, "heat", {0.875, 0.95, 0.98});
    }
}

namespace {

// The rule the default policy follows, fed what it can only estimate: the
// probability of use at a layer's next visit is the reuse rate for keys the
// layer's latest visit used, else the key's true chance of being drawn fresh,
// counted on a long continuation of the same process (not the measured window).
class TruePopularityPolicy final : public moe::CachePolicy {
public:
    TruePopularityPolicy(std::vector<double> fresh, uint32_t period, double reuse)
        : fresh_(std::move(fresh)), last_(fresh_.size(), 0), period_(period), reuse_(reuse) {}
    void on_insert(uint32_t key, uint64_t tick) override {
        resident_.push_back(key);
        use(key, tick);
    }
    void on_hit(uint32_t key, uint64_t tick) override { use(key, tick); }
    void on_remove(uint32_t key) override { resident_.erase(std::find(resident_.begin(), resident_.end(), key)); }
    bool choose_victim(bool (*evictable)(void *, uint32_t), void *ctx, uint32_t *out) override {
        double lowest = 2.0;
        for (uint32_t k : resident_) {
            if (!evictable(ctx, k)) continue;
            const double p = now_ - last_[k] < period_ ? reuse_ : fresh_[k];
            if (p < lowest) lowest = p, *out = k;
        }
        return lowest < 2.0;
    }
    const std::vector<uint32_t> &pinned() const override { return no_pins_; }

private:
    void use(uint32_t key, uint64_t tick) { now_ = std::max(now_, tick), last_[key] = tick; }
    std::vector<double> fresh_;
    std::vector<uint64_t> last_;
    std::vector<uint32_t> resident_, no_pins_;
    uint32_t period_;
    double reuse_;
    uint64_t now_ = 0;
};

}  // namespace

TEST(ReuseAwarePolicy, CloseToTheSameRuleWithTheTruePopularity) {
    moe::SynthConfig c;  // the synth defaults: top 20% take 40%, reuse 0.4
    c.n_layer = 12;
    c.bytes_per_expert = 1;
    const uint64_t measured = 1200, continuation = 20000;
    c.n_tokens = measured + continuation;
    const moe::RoutingTrace full = moe::synthesize_trace(c);
    moe::RoutingTrace t = full;
    t.truncate(measured);
    const uint32_t n_keys = c.n_layer * c.n_expert;
    std::vector<double> fresh(n_keys, 0.0);
    for (uint64_t tok = measured; tok < full.n_tokens; ++tok)
        for (uint32_t l = 0; l < c.n_layer; ++l)
            for (uint16_t e : full.experts(tok, l)) fresh[l * c.n_expert + e] += 1.0;
    for (double &f : fresh) {
        const double share = std::min(0.99, f / double(continuation));  // routed at this share of tokens
        f = share * (1.0 - c.reuse) / (1.0 - share);                     // drawn when not just used
    }
    for (double share : {0.25, 0.5, 0.75}) {
        const uint32_t capacity = static_cast<uint32_t>(share * n_keys);
        TruePopularityPolicy oracle(fresh, c.n_layer, c.reuse);
        const auto told = moe::replay_with(t, oracle, capacity, measured / 2);
        const auto learned = moe::replay_policy(t, moe::CachePolicyKind::reuse_aware, capacity, measured / 2);
        const auto best = moe::replay_belady(t, capacity, measured / 2);
        EXPECT_GE(learned.hit_rate(), told.hit_rate() - 0.015) << share;
        // The rule itself stays below 90% of Belady at 25% and 50% on these traces.
        EXPECT_LT(told.hit_rate(), best.hit_rate()) << share;
    }
}

TEST(ReuseAwarePolicy, KeepsAKeyItsLayerTendsToComeBackTo) {
    // 1 layer x 16 experts, one visit per tick; key 0 is used at every visit.
    // Key 1 comes in bursts, every 2nd visit three times per 40 visits (3/40
    // of visits); key 2 every 8 visits from the 8th to the 32nd of each 40
    // (4/40), so it is the more popular one. At the end key 1 was used two
    // visits ago, in a burst, and key 2 eleven visits ago. By popularity alone
    // key 1 would go; a key of key 1's recency class (next visit 2 after its
    // last use) is used 2 times in 3 on this layer, far more than its
    // popularity says, so key 2 goes.
    moe::UsageProfile shape{1, 16, std::vector<uint64_t>(16, 0)};
    auto p = moe::make_cache_policy(moe::CachePolicyKind::reuse_aware, 16, 4, &shape);
    bool in1 = false, in2 = false;
    const uint64_t last_tick = 4000 + 3;  // tick % 40 == 3: key 1 last used at % 40 == 2, key 2 at % 40 == 32
    for (uint64_t tick = 1; tick <= last_tick; ++tick) {
        tick == 1 ? p->on_insert(0, tick) : p->on_hit(0, tick);
        const uint64_t phase = tick % 40;
        if (phase == 0 || phase == 2 || phase == 4) in1 ? p->on_hit(1, tick) : p->on_insert(1, tick), in1 = true;
        if (phase >= 8 && phase <= 32 && phase % 8 == 0) in2 ? p->on_hit(2, tick) : p->on_insert(2, tick), in2 = true;
    }
    Blocked keep0{{0}};
    uint32_t v = ~0u;
    ASSERT_TRUE(p->choose_victim(&Blocked::evictable, &keep0, &v));
    EXPECT_EQ(v, 2u);
}

// Routing with locality over several tokens (moestream trace synth --window 12
// --recall 0.5, which gives LRU about the hit rates published for a real MoE
// model, docs/performance.md): the policy learns that experts of the last few
// tokens come back and beats LRU, which a ranking by one-token reuse and
// popularity alone did not at 50% and 75%.
TEST(ReuseAwarePolicy, BeatsLruOnTracesWithLocalityOverSeveralTokens) {
    for (uint64_t seed : {1, 2}) {
        moe::SynthConfig c;
        c.n_layer = 12;
        c.n_tokens = 1200;
        c.bytes_per_expert = 1;
        c.window = 12;
        c.recall = 0.5;
        c.seed = seed;
        const moe::RoutingTrace t = moe::synthesize_trace(c);
        const uint32_t n_keys = c.n_layer * c.n_expert;
        for (double share : {0.25, 0.5, 0.75}) {
            const uint32_t capacity = static_cast<uint32_t>(share * n_keys);
            const auto reuse = moe::replay_policy(t, moe::CachePolicyKind::reuse_aware, capacity, 600);
            const auto lru = moe::replay_policy(t, moe::CachePolicyKind::lru, capacity, 600);
            EXPECT_GT(reuse.hits, lru.hits) << "seed " << seed << " at " << share;
        }
        expect_near_belady(c, "window 12, recall 0.5", {0.80, 0.90, 0.95});
    }
}
