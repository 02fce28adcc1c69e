#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <set>
#include <unordered_set>

#include "common/error.hpp"
#include "experts/cache_policy.hpp"
#include "experts/usage_profile.hpp"
#include "support/paths.hpp"

namespace {

using moe::CachePolicy;
using moe::CachePolicyKind;

struct Blocked {
    std::unordered_set<uint32_t> keys;
    static bool evictable(void *ctx, uint32_t key) {
        return static_cast<Blocked *>(ctx)->keys.count(key) == 0;
    }
};

uint32_t victim(CachePolicy &p, Blocked &blocked) {
    uint32_t out = ~0u;
    EXPECT_TRUE(p.choose_victim(&Blocked::evictable, &blocked, &out));
    return out;
}

TEST(CachePolicyNames, ParseAndName) {
    EXPECT_EQ(moe::parse_cache_policy("lru"), CachePolicyKind::lru);
    EXPECT_EQ(moe::parse_cache_policy("lfu"), CachePolicyKind::lfu_decay);
    EXPECT_EQ(moe::parse_cache_policy("lfu-decay"), CachePolicyKind::lfu_decay);
    EXPECT_EQ(moe::parse_cache_policy("pinned"), CachePolicyKind::pinned_hot);
    EXPECT_EQ(moe::parse_cache_policy("pinned-hot"), CachePolicyKind::pinned_hot);
    for (auto k : {CachePolicyKind::lru, CachePolicyKind::lfu_decay, CachePolicyKind::pinned_hot})
        EXPECT_EQ(moe::parse_cache_policy(moe::cache_policy_name(k)), k);
    EXPECT_THROW(moe::parse_cache_policy("fifo"), moe::Error);
}

TEST(LruPolicy, EvictsLeastRecentlyUsedAndSkipsBlocked) {
    auto p = moe::make_cache_policy(CachePolicyKind::lru, 16, 3, nullptr);
    p->on_insert(1, 1);
    p->on_insert(2, 2);
    p->on_insert(3, 3);
    p->on_hit(1, 4);
    Blocked none;
    EXPECT_EQ(victim(*p, none), 2u);
    Blocked b{{2}};
    EXPECT_EQ(victim(*p, b), 3u);
    p->on_remove(2);
    EXPECT_EQ(victim(*p, none), 3u);
    Blocked all{{1, 3}};
    uint32_t out;
    EXPECT_FALSE(p->choose_victim(&Blocked::evictable, &all, &out));
}

TEST(LfuDecayPolicy, KeepsFrequentKeyOverRecentOnes) {
    auto p = moe::make_cache_policy(CachePolicyKind::lfu_decay, 64, 3, nullptr);
    uint64_t t = 0;
    p->on_insert(7, ++t);
    for (int i = 0; i < 5; ++i) p->on_hit(7, ++t);
    p->on_insert(8, ++t);
    p->on_insert(9, ++t);
    Blocked none;
    // 8 is older than 9 with the same count: 8 goes first; 7 stays.
    EXPECT_EQ(victim(*p, none), 8u);
    p->on_remove(8);
    p->on_insert(10, ++t);
    EXPECT_EQ(victim(*p, none), 9u);
}

TEST(LfuDecayPolicy, OldPopularityDecays) {
    const uint32_t n_keys = 8;
    auto p = moe::make_cache_policy(CachePolicyKind::lfu_decay, n_keys, 2, nullptr);
    uint64_t t = 0;
    p->on_insert(0, ++t);
    for (int i = 0; i < 20; ++i) p->on_hit(0, ++t);
    // A long time of other traffic: key 0's burst must not protect it forever.
    p->on_insert(1, ++t);
    for (int i = 0; i < 5000; ++i) p->on_hit(1, ++t);
    p->on_remove(1);
    p->on_insert(2, ++t);
    p->on_hit(2, ++t);
    Blocked none;
    EXPECT_EQ(victim(*p, none), 0u);
}

TEST(PinnedHotPolicy, PinsHottestKeysOfTheProfile) {
    moe::UsageProfile prof;
    prof.n_layer = 2;
    prof.n_expert = 8;
    prof.counts.assign(16, 1);
    prof.counts[3] = 100;
    prof.counts[12] = 90;
    prof.counts[5] = 80;
    auto p = moe::make_cache_policy(CachePolicyKind::pinned_hot, 16, 4, &prof);
    ASSERT_EQ(p->pinned().size(), 2u);  // half the slots
    EXPECT_EQ(p->pinned()[0], 3u);
    EXPECT_EQ(p->pinned()[1], 12u);
    uint64_t t = 0;
    for (uint32_t k : {3u, 12u, 0u, 1u}) p->on_insert(k, ++t);
    Blocked none;
    for (int i = 0; i < 10; ++i) {
        const uint32_t v = victim(*p, none);
        EXPECT_NE(v, 3u);
        EXPECT_NE(v, 12u);
    }
    Blocked rest{{0, 1}};
    uint32_t out;
    EXPECT_FALSE(p->choose_victim(&Blocked::evictable, &rest, &out));
}

TEST(PinnedHotPolicy, WithoutProfileBehavesLikeLfu) {
    auto p = moe::make_cache_policy(CachePolicyKind::pinned_hot, 16, 4, nullptr);
    EXPECT_TRUE(p->pinned().empty());
}

// Drives every policy, with and without a usage profile, through a random
// cache simulation and checks the invariants the live cache relies on.
TEST(CachePolicy, RandomTraceInvariants) {
    const uint32_t n_keys = 200, capacity = 24;
    moe::UsageProfile prof{10, 20, std::vector<uint64_t>(n_keys)};
    std::mt19937 rng(42);
    for (auto &c : prof.counts) c = rng() % 50;
    const moe::UsageProfile *const profiles[] = {&prof, nullptr};
    for (const moe::UsageProfile *profile : profiles)
    for (auto kind : {CachePolicyKind::lru, CachePolicyKind::lfu_decay, CachePolicyKind::pinned_hot,
                      CachePolicyKind::reuse_aware}) {
        auto p = moe::make_cache_policy(kind, n_keys, capacity, profile);
        if (kind == CachePolicyKind::reuse_aware) EXPECT_TRUE(p->pinned().empty());
        std::set<uint32_t> pinned(p->pinned().begin(), p->pinned().end());
        std::set<uint32_t> resident;
        uint64_t t = 0;
        for (int step = 0; step < 20000; ++step) {
            const uint32_t key = (rng() % 3 == 0) ? rng() % 20 : rng() % n_keys;  // some skew
            ++t;
            if (resident.count(key)) {
                p->on_hit(key, t);
                continue;
            }
            if (resident.size() == capacity) {
                Blocked blocked;
                for (int i = 0; i < 4; ++i) blocked.keys.insert(rng() % n_keys);
                uint32_t v = ~0u;
                const bool found = p->choose_victim(&Blocked::evictable, &blocked, &v);
                bool any = false;
                for (uint32_t r : resident) any |= !blocked.keys.count(r) && !pinned.count(r);
                ASSERT_EQ(found, any) << moe::cache_policy_name(kind);
                if (!found) continue;
                ASSERT_TRUE(resident.count(v)) << moe::cache_policy_name(kind);
                ASSERT_FALSE(blocked.keys.count(v)) << moe::cache_policy_name(kind);
                ASSERT_FALSE(pinned.count(v)) << moe::cache_policy_name(kind);
                p->on_remove(v);
                resident.erase(v);
            }
            p->on_insert(key, t);
            resident.insert(key);
        }
    }
}

TEST(UsageProfile, RoundTripAndRejectsMismatch) {
    const std::string dir = moe::test::scratch_dir();
    const std::string path = dir + "/usage.bin";
    moe::UsageProfile prof{3, 4, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}};
    moe::save_usage_profile(path, 0xabcdef, prof);
    auto back = moe::load_usage_profile(path, 0xabcdef, 3, 4);
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->counts, prof.counts);
    std::string why;
    EXPECT_FALSE(moe::load_usage_profile(path, 0x1234, 3, 4, &why).has_value());
    EXPECT_NE(why.find("another model"), std::string::npos);
    EXPECT_FALSE(moe::load_usage_profile(path, 0xabcdef, 4, 3, &why).has_value());
    EXPECT_FALSE(moe::load_usage_profile(dir + "/absent", 0xabcdef, 3, 4, &why).has_value());
    std::filesystem::remove_all(dir);
}

}  // namespace
