// Cache simulation on routing traces: the live cache policies (same classes,
// via make_cache_policy) and the offline-optimal Belady cache.
//
// The trace is visited token by token, layer by layer; a layer's experts are
// requested together, so none of them may be evicted while the layer loads
// (as in the live cache). The first `warmup_tokens` tokens warm the cache and
// provide the usage profile of the pinned-hot policy; hits and misses are
// counted on the tokens after them.
#pragma once

#include <cstdint>

#include "experts/cache_policy.hpp"
#include "experts/routing_trace.hpp"

namespace moe {

struct ReplayResult {
    uint64_t accesses = 0;   // routed (token, layer, expert) triples in the measured window
    uint64_t hits = 0;
    uint64_t misses = 0;
    uint64_t bytes_read = 0; // misses * bytes_per_expert (UINT64_MAX if that overflows)
    uint32_t capacity = 0;   // slots
    double hit_rate() const { return accesses ? double(hits) / double(accesses) : 0.0; }
};

// Slots a cache of `cache_bytes` holds (one slot = one expert of one layer).
uint32_t replay_capacity(const RoutingTrace &trace, uint64_t cache_bytes);

ReplayResult replay_policy(const RoutingTrace &trace, CachePolicyKind kind, uint32_t capacity, uint64_t warmup_tokens);

// The same simulation driving a policy the caller made (replay_policy makes
// one with the warm-up tokens' usage profile); fails if the policy picks a
// key that is not resident or belongs to the layer being loaded.
ReplayResult replay_with(const RoutingTrace &trace, CachePolicy &policy, uint32_t capacity, uint64_t warmup_tokens);

// Belady (MIN): on a miss with a full cache, evict the key whose next use is
// furthest in the future; every missing key is admitted (demand paging, as in
// the engine, which computes an expert only from a cache slot). With warmup_tokens > 0 the cache starts the
// measured window holding the keys used soonest in it, the best possible
// warm state, so the result bounds every policy from above.
ReplayResult replay_belady(const RoutingTrace &trace, uint32_t capacity, uint64_t warmup_tokens);

}  // namespace moe
