// The expert cache's share of a budget, and what the planner says when a
// budget is too small.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "common/error.hpp"
#include "experts/budget_planner.hpp"
#include "model/kv_cache.hpp"
#include "model/hparams.hpp"

namespace {

moe::CachePlanInput plan(uint64_t budget) {
    moe::CachePlanInput in;
    in.budget = budget;
    in.dense_bytes = 578ull << 20;
    in.runtime_bytes = (93ull << 20) + 12345;  // not a whole MiB: the figure must round up
    in.slot_bytes = (2ull << 20) + (900ull << 10);
    in.min_slots = 128;
    return in;
}

// The budget (bytes) the out_of_memory error of a refused plan names as
// "at least N MiB"; 0 after a test failure when it is not refused that way.
template <class Plan>
uint64_t named_least_budget(Plan refused_plan) {
    std::string message;
    try {
        refused_plan();
        ADD_FAILURE() << "the budget was not refused";
        return 0;
    } catch (const moe::Error &e) {
        EXPECT_EQ(e.status(), moe::Status::out_of_memory);
        message = e.what();
    }
    std::smatch m;
    if (!std::regex_search(message, m, std::regex("at least ([0-9]+)MiB"))) {
        ADD_FAILURE() << "no least budget named: " << message;
        return 0;
    }
    return std::stoull(m[1].str()) << 20;
}

// The error names a budget in MiB; that budget must be enough, and one MiB
// less must not (the figure is the least whole MiB that holds one layer).
TEST(BudgetPlanner, TooSmallBudgetNamesTheLeastBudgetThatIsEnough) {
    const uint64_t enough = named_least_budget([] { moe::plan_cache_slots(plan(1ull << 30)); });
    ASSERT_GT(enough, 0u);
    EXPECT_GE(moe::plan_cache_slots(plan(enough)), 128u);
    EXPECT_THROW(moe::plan_cache_slots(plan(enough - (1ull << 20))), moe::Error);
}

TEST(BudgetPlanner, DenseAndRuntimeOverTheBudgetAreNamed) {
    try {
        moe::plan_cache_slots(plan(600ull << 20));
        FAIL() << "dense + runtime exceed 600 MiB";
    } catch (const moe::Error &e) {
        EXPECT_EQ(e.status(), moe::Status::out_of_memory);
        EXPECT_NE(std::string(e.what()).find("already exceed it"), std::string::npos) << e.what();
    }
}

// A model whose layers are all dense has no expert slot: no slot is planned,
// but the dense weights and runtime must still fit.
TEST(BudgetPlanner, NoRoutedExpertsPlansNoSlotWithinTheBudget) {
    moe::CachePlanInput in = plan(1ull << 30);
    in.slot_bytes = 0;
    in.min_slots = 0;
    EXPECT_EQ(moe::plan_cache_slots(in), 0u);
    in.budget = 600ull << 20;
    EXPECT_THROW(moe::plan_cache_slots(in), moe::Error);
}

moe::ExpertSharePlanInput share_plan(uint64_t budget) {
    const moe::CachePlanInput slots = plan(budget);
    moe::ExpertSharePlanInput in;
    in.budget = budget;
    in.dense_bytes = slots.dense_bytes;
    in.runtime_bytes = slots.runtime_bytes;
    in.min_bytes = uint64_t(slots.min_slots) * slots.slot_bytes;
    in.expert_bytes = 48 * in.min_bytes;
    return in;
}

// The mapped mode keeps the same promise: a budget that cannot hold one
// layer's experts beside the dense weights and runtime is refused, naming the
// least budget that is enough, instead of being exceeded.
TEST(BudgetPlanner, MappedShareRefusesWhatTheBudgetCannotHold) {
    const uint64_t enough = named_least_budget([] { moe::plan_expert_share(share_plan(1ull << 30)); });
    ASSERT_GT(enough, 0u);
    const moe::ExpertSharePlanInput in = share_plan(enough);
    EXPECT_GE(moe::plan_expert_share(in), in.min_bytes);
    EXPECT_THROW(moe::plan_expert_share(share_plan(enough - (1ull << 20))), moe::Error);
    try {
        moe::plan_expert_share(share_plan(600ull << 20));
        FAIL() << "dense + runtime exceed 600 MiB";
    } catch (const moe::Error &e) {
        EXPECT_NE(std::string(e.what()).find("already exceed it"), std::string::npos) << e.what();
    }
}

// What the budget leaves is the share, capped by the experts there are.
TEST(BudgetPlanner, MappedShareIsWhatIsLeftUpToEveryExpert) {
    moe::ExpertSharePlanInput in = share_plan(4ull << 30);
    EXPECT_EQ(moe::plan_expert_share(in), in.budget - in.dense_bytes - in.runtime_bytes);
    in.budget = 64ull << 30;
    EXPECT_EQ(moe::plan_expert_share(in), in.expert_bytes);
    in.expert_bytes = 0;  // no routed experts: nothing to share, nothing needed
    in.min_bytes = 0;
    EXPECT_EQ(moe::plan_expert_share(in), 0u);
}

// gpt-oss-20b's attention: 24 layers, every other one sliding over 128
// positions. What a context keeps beyond the weights counts those layers'
// rings (128 + 64 - 1 rows at the default 64-token chunks, with copies of
// 127 rows), not n_ctx rows: the budget leaves the difference to the experts.
TEST(BudgetPlanner, SlidingWindowLayersCountTheirRings) {
    moe::HParams hp;
    hp.n_layer = 24;
    hp.n_ctx_train = 131072;
    hp.n_embd = 2880;
    hp.n_head = 64;
    hp.n_head_kv = 8;
    hp.head_dim_k = hp.head_dim_v = 64;
    hp.n_vocab = 201088;
    hp.n_expert = 32;
    hp.n_expert_used = 4;
    hp.n_ff_expert = 2880;
    const uint64_t full = moe::runtime_bytes_bound(hp, 8192, 64, 4);
    hp.n_swa = 128;
    hp.swa_layers = moe::swa_layers_of_period(24, 2);
    const uint64_t rings = moe::runtime_bytes_bound(hp, 8192, 64, 4);
    const uint64_t row = 8 * (64 + 64) * 2;  // K and V of one position, f16
    EXPECT_EQ(full - rings, 12 * (8192 - (128 + 63) - 127) * row);
    // An exact context keeps F32 rows: twice the KV bytes (rows of the
    // full-attention layers, the rings and the windows a step keeps aside).
    const uint64_t kv_f16 = moe::kv_layout_for(hp, 8192, 64).bytes(2);
    EXPECT_GE(kv_f16, 12 * (8192 + 128 + 63) * row);
    EXPECT_EQ(moe::runtime_bytes_bound(hp, 8192, 64, 4, true) - rings, kv_f16);
    // A context no longer than a ring keeps every position of every layer.
    EXPECT_EQ(moe::runtime_bytes_bound(hp, 160, 64, 4), [&] {
        moe::HParams no_window = hp;
        no_window.n_swa = 0;
        return moe::runtime_bytes_bound(no_window, 160, 64, 4);
    }());
}

}  // namespace
