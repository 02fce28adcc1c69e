#include "experts/budget_planner.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "common/topology.hpp"
#include "experts/io_mode_choice.hpp"
#include "model/hparams.hpp"

namespace moe {

uint64_t forward_scratch_bound(const HParams &hp, int32_t max_batch, int32_t n_ctx, int32_t n_threads) {
    const uint64_t B = uint64_t(std::max(max_batch, 1));
    const uint64_t ctx = uint64_t(context_length(hp, n_ctx));
    const uint64_t threads = uint64_t(n_threads > 0 ? n_threads : topology::physical_cores());
    const uint64_t E = uint64_t(std::max(hp.n_embd, 0)), K = uint64_t(std::max(hp.n_expert_used, 0));
    const uint64_t n_exp = uint64_t(std::max(hp.n_expert, 0));
    const uint64_t q = uint64_t(std::max(hp.n_head, 0)) * uint64_t(std::max(hp.head_dim_k, 0));
    const uint64_t o = uint64_t(std::max(hp.n_head, 0)) * uint64_t(std::max(hp.head_dim_v, 0));
    const uint64_t kv = uint64_t(std::max(hp.n_head_kv, 0)) *
                        (uint64_t(std::max(hp.head_dim_k, 0)) + uint64_t(std::max(hp.head_dim_v, 0)));
    const uint64_t ff = uint64_t(std::max({hp.n_ff_expert, hp.n_ff, 0}));
    const uint64_t ff_shared = uint64_t(std::max(hp.n_ff_shared, 0));
    // Values (f32 or i32) per token row: hidden-state buffers, attention,
    // routing, per-slot outputs, expert and shared-expert FFN, lookahead.
    const uint64_t per_token = 8 * E + q + o + kv + uint64_t(std::max(hp.n_rot, 0)) + 2 * n_exp + K * E + 6 * K +
                               3 * ff + 3 * ff_shared + 1;
    // Quantised activations: at most an f32 copy of the widest input row.
    const uint64_t act_row = std::max({E, o, ff, ff_shared}) * 4 + 64;
    const uint64_t fixed = threads * ctx + 6 * n_exp + E;
    return 4 * (B * per_token + fixed) + B * act_row;
}

uint64_t runtime_bytes_bound(const HParams &hp, int32_t n_ctx, int32_t max_batch, int32_t n_threads, bool exact) {
    const int32_t ctx = context_length(hp, n_ctx);
    return estimate_runtime_overhead(hp, ctx, max_batch, exact) +
           forward_scratch_bound(hp, std::min(max_batch, ctx), ctx, n_threads);
}

namespace {

// Dense weights and runtime come first: a budget they already exceed cannot be
// kept whatever happens to the experts. Returns what they take.
uint64_t fixed_within_budget(uint64_t budget, uint64_t dense_bytes, uint64_t runtime_bytes) {
    const uint64_t fixed = dense_bytes + runtime_bytes;
    if (fixed > budget)
        fail(Status::out_of_memory,
             "memory budget %s is too small: dense weights %s + KV cache and scratch %s = %s already exceed it",
             human_bytes(budget).c_str(), human_bytes(dense_bytes).c_str(), human_bytes(runtime_bytes).c_str(),
             human_bytes(fixed).c_str());
    return fixed;
}

// The least whole MiB that holds fixed + need, rounded up so that the figure
// given is enough (a rounded GiB figure can equal the budget).
unsigned long long least_budget_mib(uint64_t fixed, uint64_t need) {
    return (unsigned long long)((fixed + need + (1u << 20) - 1) >> 20);
}

}  // namespace

uint32_t plan_cache_slots(const CachePlanInput &in) {
    const uint64_t fixed = fixed_within_budget(in.budget, in.dense_bytes, in.runtime_bytes);
    // A model without routed experts (every layer dense) needs no slot.
    if (in.slot_bytes == 0 && in.min_slots == 0) return 0;
    if (in.slot_bytes == 0) fail(Status::internal, "expert slot size is zero for %u experts a layer", in.min_slots);
    uint64_t slots = (in.budget - fixed) / in.slot_bytes;
    if (in.max_slots) slots = std::min<uint64_t>(slots, in.max_slots);
    if (slots < in.min_slots)
        fail(Status::out_of_memory,
             "memory budget %s leaves %s for experts after dense %s and runtime %s: %llu slot(s) of %s, "
             "but one layer may need %u; raise the budget to at least %lluMiB",
             human_bytes(in.budget).c_str(), human_bytes(in.budget - fixed).c_str(), human_bytes(in.dense_bytes).c_str(),
             human_bytes(in.runtime_bytes).c_str(), (unsigned long long)slots, human_bytes(in.slot_bytes).c_str(),
             in.min_slots, least_budget_mib(fixed, uint64_t(in.min_slots) * in.slot_bytes));
    return static_cast<uint32_t>(std::min<uint64_t>(slots, UINT32_MAX));
}

uint64_t plan_expert_share(const ExpertSharePlanInput &in) {
    const uint64_t fixed = fixed_within_budget(in.budget, in.dense_bytes, in.runtime_bytes);
    const uint64_t share = in.budget - fixed;
    const uint64_t need = std::min(in.min_bytes, in.expert_bytes);
    if (share < need)
        fail(Status::out_of_memory,
             "memory budget %s leaves %s for experts after dense %s and runtime %s, but one layer's experts (%s) "
             "may be mapped at once; raise the budget to at least %lluMiB",
             human_bytes(in.budget).c_str(), human_bytes(share).c_str(), human_bytes(in.dense_bytes).c_str(),
             human_bytes(in.runtime_bytes).c_str(), human_bytes(need).c_str(), least_budget_mib(fixed, need));
    return std::min(share, in.expert_bytes);
}

}  // namespace moe
