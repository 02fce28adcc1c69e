// libFuzzer target for the usage profile reader (src/experts/usage_profile.cpp)
// and the cache policies a loaded profile seeds: opening a model reads
// MODEL.moeusage, whatever it holds, and hands its counts to the policy.
//
// The model's fingerprint and shape are taken from the input's own header
// (bounded), so mutations reach the counts instead of stopping at a mismatch.
// A profile that loads must have one count per key; every policy made from it
// then runs a cache of a few slots on keys drawn from the input, and must pick
// only resident, evictable keys and pin keys that exist.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "experts/cache_policy.hpp"
#include "experts/usage_profile.hpp"
#include "input_file.hpp"

namespace {

void require(bool ok) {
    if (!ok) __builtin_trap();
}

template <typename T>
T field(const uint8_t *data, size_t size, size_t offset) {
    T v{};
    if (offset + sizeof v <= size) std::memcpy(&v, data + offset, sizeof v);
    return v;
}

struct Cache {
    std::vector<bool> resident, busy;
    static bool evictable(void *ctx, uint32_t key) { return !static_cast<Cache *>(ctx)->busy[key]; }
};

// A cache of `capacity` slots over the keys the input's bytes name, as the
// engine drives a policy: a layer's keys are busy while it loads.
void run_policy(moe::CachePolicyKind kind, const moe::UsageProfile &profile, uint32_t capacity, const uint8_t *data,
                size_t size) {
    const uint32_t n_keys = profile.n_layer * profile.n_expert;
    const auto policy = moe::make_cache_policy(kind, n_keys, capacity, &profile);
    for (uint32_t key : policy->pinned()) require(key < n_keys);
    require(policy->pinned().size() <= capacity);
    Cache cache{std::vector<bool>(n_keys), std::vector<bool>(n_keys)};
    uint32_t resident = 0;
    for (size_t i = 0; i + 2 <= size && i < 512; i += 2) {
        const uint32_t key = (uint32_t(data[i]) << 8 | data[i + 1]) % n_keys;
        const uint64_t tick = i / 2;
        if (cache.resident[key]) {
            policy->on_hit(key, tick);
            continue;
        }
        cache.busy[key] = true;
        if (resident >= capacity) {
            uint32_t victim = 0;
            if (!policy->choose_victim(&Cache::evictable, &cache, &victim)) {
                cache.busy[key] = false;
                continue;
            }
            require(victim < n_keys && cache.resident[victim] && !cache.busy[victim]);
            policy->on_remove(victim);
            cache.resident[victim] = false;
            --resident;
        }
        policy->on_insert(key, tick);
        cache.resident[key] = true;
        cache.busy[key] = false;
        ++resident;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static moe::fuzz::InputFile input;
    // Header: "MOEUSAGE" | u32 version | u32 n_layer | u32 n_expert | u32 reserved | u64 fingerprint.
    const uint32_t n_layer = field<uint32_t>(data, size, 12), n_expert = field<uint32_t>(data, size, 16);
    const uint64_t fingerprint = field<uint64_t>(data, size, 24);
    if (n_layer == 0 || n_expert == 0 || uint64_t(n_layer) * n_expert > 4096) return 0;
    std::string why;
    moe::ProfileLoadFailure failure{};
    const auto profile = moe::load_usage_profile(input.holding(data, size), fingerprint, n_layer, n_expert, &why, &failure);
    if (!profile) {
        require(failure == moe::ProfileLoadFailure::unusable && !why.empty());
        return 0;
    }
    require(failure == moe::ProfileLoadFailure::none && profile->n_layer == n_layer && profile->n_expert == n_expert &&
            profile->counts.size() == uint64_t(n_layer) * n_expert);
    const uint32_t n_keys = n_layer * n_expert;
    for (uint32_t capacity : {1u, std::max(1u, n_keys / 4), n_keys})
        for (moe::CachePolicyKind kind : {moe::CachePolicyKind::lru, moe::CachePolicyKind::lfu_decay,
                                          moe::CachePolicyKind::pinned_hot, moe::CachePolicyKind::reuse_aware})
            run_policy(kind, *profile, capacity, data, size);
    return 0;
}
