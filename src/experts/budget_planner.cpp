#include "experts/budget_planner.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "runtime/io_mode_choice.hpp"

namespace moe {

uint32_t plan_cache_slots(const CachePlanInput &in) {
    if (in.slot_bytes == 0) fail(Status::invalid_argument, "expert slot size is zero");
    const uint64_t fixed = in.dense_bytes + in.runtime_bytes;
    if (fixed > in.budget)
        fail(Status::out_of_memory,
             "memory budget %s is too small: dense weights %s + KV cache and scratch %s = %s already exceed it",
             human_bytes(in.budget).c_str(), human_bytes(in.dense_bytes).c_str(), human_bytes(in.runtime_bytes).c_str(),
             human_bytes(fixed).c_str());
    uint64_t slots = (in.budget - fixed) / in.slot_bytes;
    if (in.max_slots) slots = std::min<uint64_t>(slots, in.max_slots);
    if (slots < in.min_slots)
        fail(Status::out_of_memory,
             "memory budget %s leaves %s for experts after dense %s and runtime %s: %llu slot(s) of %s, "
             "but one layer may need %u; raise the budget to at least %s",
             human_bytes(in.budget).c_str(), human_bytes(in.budget - fixed).c_str(), human_bytes(in.dense_bytes).c_str(),
             human_bytes(in.runtime_bytes).c_str(), (unsigned long long)slots, human_bytes(in.slot_bytes).c_str(),
             in.min_slots, human_bytes(fixed + uint64_t(in.min_slots) * in.slot_bytes).c_str());
    return static_cast<uint32_t>(std::min<uint64_t>(slots, UINT32_MAX));
}

uint64_t plan_expert_share(const ExpertSharePlanInput &in) {
    const uint64_t fixed = in.dense_bytes + in.runtime_bytes;
    uint64_t share = in.budget > fixed ? in.budget - fixed : 0;
    share = std::max(share, in.min_bytes);
    return std::min(share, in.expert_bytes);
}

}  // namespace moe
