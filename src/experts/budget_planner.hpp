// How many expert cache slots a memory budget leaves room for, after the
// dense weights, the KV cache and scratch. The budget bounds the whole
// engine, so the cache gets only what is left.
#pragma once

#include <cstdint>

namespace moe {

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

}  // namespace moe
