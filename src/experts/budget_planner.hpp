// How many expert cache slots a memory budget leaves room for, after the
// dense weights, the KV cache and scratch. The budget bounds the whole
// engine, so the cache gets only what is left.
#pragma once

#include <cstdint>

namespace moe {

struct HParams;

// Upper bound of the forward pass's scratch for batches of max_batch tokens
// (activation rows of every buffer, quantised activations, attention scores
// per thread, lookahead), which the runtime estimate of io_mode_choice does
// not scale with the batch. n_threads 0 = one per physical core.
uint64_t forward_scratch_bound(const HParams &hp, int32_t max_batch, int32_t n_ctx, int32_t n_threads);

// Everything besides the weights that a context opened with these settings
// keeps (KV cache, fixed allowance, batch scratch): what the I/O-mode choice
// and the cache plan subtract from the budget. Opening a context and
// moestream_inspect both use it, so inspect predicts the mode open picks.
// n_ctx 0 = min(model's, 4096); n_threads 0 = one per physical core; exact:
// the context keeps an F32 KV cache (ContextParams::exact), else F16.
uint64_t runtime_bytes_bound(const HParams &hp, int32_t n_ctx, int32_t max_batch, int32_t n_threads,
                             bool exact = false);

struct CachePlanInput {
    uint64_t budget = 0;          // bytes for the whole engine
    uint64_t dense_bytes = 0;     // resident weights
    uint64_t runtime_bytes = 0;   // KV cache, scratch and bookkeeping
    uint64_t slot_bytes = 0;      // one expert (aligned)
    uint32_t min_slots = 1;       // experts one layer may need at once
    uint32_t max_slots = 0;       // every expert of the model (0 = no limit)
};

// Throws moe::Error(out_of_memory) naming the numbers when the dense weights
// and runtime alone exceed the budget, or when what is left holds fewer than
// min_slots experts.
uint32_t plan_cache_slots(const CachePlanInput &in);

struct ExpertSharePlanInput {
    uint64_t budget = 0;          // bytes for the whole engine
    uint64_t dense_bytes = 0;     // resident weights
    uint64_t runtime_bytes = 0;   // KV cache, scratch and bookkeeping
    uint64_t expert_bytes = 0;    // every routed expert of the model
    uint64_t min_bytes = 0;       // what one layer may need at once
};

// Bytes of routed experts the mmap source keeps advised at once: what the
// budget leaves after dense weights and runtime, at most expert_bytes (the
// whole model fits: nothing is ever released). Throws moe::Error(out_of_memory)
// as plan_cache_slots does when the dense weights and runtime exceed the
// budget or what is left is less than min_bytes: a layer's experts must stay
// mapped while it computes, so a smaller share could not keep the budget.
uint64_t plan_expert_share(const ExpertSharePlanInput &in);

}  // namespace moe
