#include "experts/trace_replay.hpp"

#include <algorithm>
#include <limits>
#include <set>
#include <vector>

#include "common/error.hpp"
#include "common/saturating.hpp"

namespace moe {
namespace {

uint32_t key_of(const RoutingTrace &t, uint32_t layer, uint16_t expert) { return layer * t.header.n_expert + expert; }

// Flattened access sequence of the window [first_token, n_tokens).
std::vector<uint32_t> accesses_from(const RoutingTrace &t, uint64_t first_token) {
    std::vector<uint32_t> seq;
    for (uint64_t tok = first_token; tok < t.n_tokens; ++tok)
        for (uint32_t l = 0; l < t.header.n_layer; ++l)
            for (uint16_t e : t.experts(tok, l))
                if (e != kTraceNoExpert) seq.push_back(key_of(t, l, e));
    return seq;
}

struct PinnedRow {
    const std::vector<uint8_t> *in_row;
};

bool evictable_outside_row(void *ctx, uint32_t key) { return !(*static_cast<PinnedRow *>(ctx)->in_row)[key]; }

}  // namespace

uint32_t replay_capacity(const RoutingTrace &trace, uint64_t cache_bytes) {
    const uint64_t per = std::max<uint64_t>(1, trace.header.bytes_per_expert);
    const uint64_t n_keys = uint64_t(trace.header.n_layer) * trace.header.n_expert;
    return static_cast<uint32_t>(std::min<uint64_t>(cache_bytes / per, n_keys));
}

ReplayResult replay_policy(const RoutingTrace &t, CachePolicyKind kind, uint32_t capacity, uint64_t warmup_tokens) {
    const auto &h = t.header;
    const uint32_t n_keys = h.n_layer * h.n_expert;
    warmup_tokens = std::min(warmup_tokens, t.n_tokens);
    UsageProfile profile{h.n_layer, h.n_expert, std::vector<uint64_t>(n_keys, 0)};
    for (uint64_t tok = 0; tok < warmup_tokens; ++tok)
        for (uint32_t l = 0; l < h.n_layer; ++l)
            for (uint16_t e : t.experts(tok, l))
                if (e != kTraceNoExpert) ++profile.counts[key_of(t, l, e)];
    std::unique_ptr<CachePolicy> policy = make_cache_policy(kind, n_keys, std::max<uint32_t>(capacity, 1), &profile);
    return replay_with(t, *policy, capacity, warmup_tokens);
}

ReplayResult replay_with(const RoutingTrace &t, CachePolicy &policy, uint32_t capacity, uint64_t warmup_tokens) {
    const auto &h = t.header;
    const uint32_t n_keys = h.n_layer * h.n_expert;
    warmup_tokens = std::min(warmup_tokens, t.n_tokens);
    ReplayResult r;
    r.capacity = capacity;
    std::vector<uint8_t> resident(n_keys, 0), in_row(n_keys, 0);
    PinnedRow pin{&in_row};
    uint32_t n_resident = 0;
    uint64_t tick = 0;
    for (uint64_t tok = 0; tok < t.n_tokens; ++tok) {
        const bool counted = tok >= warmup_tokens;
        for (uint32_t l = 0; l < h.n_layer; ++l) {
            auto row = t.experts(tok, l);
            for (uint16_t e : row)
                if (e != kTraceNoExpert) in_row[key_of(t, l, e)] = 1;
            ++tick;
            for (uint16_t e : row) {
                if (e == kTraceNoExpert) continue;
                const uint32_t key = key_of(t, l, e);
                const bool hit = resident[key];
                if (counted) {
                    ++r.accesses;
                    hit ? ++r.hits : ++r.misses;
                }
                if (hit) {
                    policy.on_hit(key, tick);
                    continue;
                }
                if (n_resident >= capacity) {
                    uint32_t victim = 0;
                    if (!policy.choose_victim(evictable_outside_row, &pin, &victim)) continue;  // read, not kept
                    if (!resident[victim] || in_row[victim])
                        fail(Status::internal, "cache policy chose key %u which is not evictable", victim);
                    resident[victim] = 0;
                    --n_resident;
                    policy.on_remove(victim);
                }
                resident[key] = 1;
                ++n_resident;
                policy.on_insert(key, tick);
            }
            for (uint16_t e : row)
                if (e != kTraceNoExpert) in_row[key_of(t, l, e)] = 0;
        }
    }
    r.bytes_read = sat_mul(r.misses, h.bytes_per_expert);
    return r;
}

ReplayResult replay_belady(const RoutingTrace &t, uint32_t capacity, uint64_t warmup_tokens) {
    const auto &h = t.header;
    const uint32_t n_keys = h.n_layer * h.n_expert;
    warmup_tokens = std::min(warmup_tokens, t.n_tokens);
    const std::vector<uint32_t> seq = accesses_from(t, warmup_tokens);
    constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();
    std::vector<uint64_t> next(seq.size()), upcoming(n_keys, kNever);
    for (size_t i = seq.size(); i-- > 0;) {
        next[i] = upcoming[seq[i]];
        upcoming[seq[i]] = i;
    }
    // upcoming[key] is now the first use of key in the window.

    ReplayResult r;
    r.capacity = capacity;
    std::vector<uint64_t> resident_next(n_keys, kNever);
    std::vector<uint8_t> resident(n_keys, 0);
    std::set<std::pair<uint64_t, uint32_t>, std::greater<>> by_next;  // furthest next use first
    auto admit = [&](uint32_t key, uint64_t next_use) {
        resident[key] = 1;
        resident_next[key] = next_use;
        by_next.emplace(next_use, key);
    };
    if (warmup_tokens > 0 && capacity > 0) {
        std::vector<uint32_t> keys;
        for (uint32_t k = 0; k < n_keys; ++k)
            if (upcoming[k] != kNever) keys.push_back(k);
        std::sort(keys.begin(), keys.end(), [&](uint32_t a, uint32_t b) { return upcoming[a] < upcoming[b]; });
        for (size_t i = 0; i < keys.size() && i < capacity; ++i) admit(keys[i], upcoming[keys[i]]);
    }
    for (size_t i = 0; i < seq.size(); ++i) {
        const uint32_t key = seq[i];
        ++r.accesses;
        if (resident[key]) {
            ++r.hits;
            by_next.erase({resident_next[key], key});
            resident_next[key] = next[i];
            by_next.emplace(next[i], key);
            continue;
        }
        ++r.misses;
        if (capacity == 0) continue;
        if (by_next.size() >= capacity) {
            // Demand paging, as in the engine: a missing expert must be loaded into a slot to be used.
            auto far = by_next.begin();
            resident[far->second] = 0;
            by_next.erase(far);
        }
        admit(key, next[i]);
    }
    r.bytes_read = sat_mul(r.misses, h.bytes_per_expert);
    return r;
}

}  // namespace moe
