// Eviction policies for the expert cache, shared by the live cache and the
// trace replay simulator so both judge exactly the same logic.
//
// Keys identify one expert of one layer: key = layer * n_expert + expert.
// The policy only ranks keys; the cache owns slots and tells the policy what
// happened. choose_victim() must skip keys the cache marks as not evictable
// (in use by the running layer, or with a read in flight).
//
// Event protocol (what the live cache and the simulator both do):
//   access to a resident key          -> on_hit
//   access to a missing key           -> choose_victim/on_remove if full, then on_insert
//   prefetch of a missing key         -> choose_victim/on_remove if full, then
//                                        on_prefetch when it lands (on_insert
//                                        if the layer asked for it meanwhile)
// on_insert counts as one use of the key for frequency-based policies;
// on_prefetch is not a use (the hint may be wrong), and a policy that does not
// tell the two apart treats it as on_insert.
// `tick` is a non-decreasing clock supplied by the caller (the live cache uses
// its layer-visit counter); policies only rely on event order, so any
// monotone clock works.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace moe {

enum class CachePolicyKind : int32_t { lru = 1, lfu_decay = 2, pinned_hot = 3, reuse_aware = 4 };

const char *cache_policy_name(CachePolicyKind kind);
// Parses "lru", "lfu", "lfu-decay", "pinned", "pinned-hot", "reuse", "reuse-aware"; throws invalid_argument otherwise.
CachePolicyKind parse_cache_policy(const std::string &name);

class CachePolicy {
public:
    virtual ~CachePolicy() = default;
    // A key became resident (after a miss or a prefetch).
    virtual void on_insert(uint32_t key, uint64_t tick) = 0;
    // A key read ahead of its use became resident; not a use. Policies that
    // count uses only on demand override it.
    virtual void on_prefetch(uint32_t key, uint64_t tick) { on_insert(key, tick); }
    // A resident key was used by the forward pass.
    virtual void on_hit(uint32_t key, uint64_t tick) = 0;
    // A key left the cache.
    virtual void on_remove(uint32_t key) = 0;
    // Picks the resident key to evict among those with evictable(key) true.
    // Returns false when none can be evicted. Must not allocate.
    virtual bool choose_victim(bool (*evictable)(void *ctx, uint32_t key), void *ctx, uint32_t *out) = 0;
    // Keys a policy wants kept permanently (pinned hot set); empty for most.
    virtual const std::vector<uint32_t> &pinned() const = 0;
};

// Usage history: how often each key was routed (a usage profile file holds it).
struct UsageProfile {
    uint32_t n_layer = 0;
    uint32_t n_expert = 0;
    std::vector<uint64_t> counts;  // n_layer * n_expert
};

// capacity: number of slots; n_keys: n_layer * n_expert; profile may be null.
std::unique_ptr<CachePolicy> make_cache_policy(CachePolicyKind kind, uint32_t n_keys, uint32_t capacity,
                                               const UsageProfile *profile);

}  // namespace moe
