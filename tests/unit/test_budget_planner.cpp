// The expert cache's share of a budget, and what the planner says when a
// budget is too small.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "common/error.hpp"
#include "experts/budget_planner.hpp"

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

// The error names a budget in MiB; that budget must be enough, and one MiB
// less must not (the figure is the least whole MiB that holds one layer).
TEST(BudgetPlanner, TooSmallBudgetNamesTheLeastBudgetThatIsEnough) {
    std::string message;
    try {
        moe::plan_cache_slots(plan(1ull << 30));
        FAIL() << "1 GiB should not hold 128 slots";
    } catch (const moe::Error &e) {
        EXPECT_EQ(e.status(), moe::Status::out_of_memory);
        message = e.what();
    }
    std::smatch m;
    ASSERT_TRUE(std::regex_search(message, m, std::regex("at least ([0-9]+)MiB"))) << message;
    const uint64_t enough = std::stoull(m[1].str()) << 20;
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

}  // namespace
