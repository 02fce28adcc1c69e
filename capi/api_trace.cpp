// C API of routing traces: synthesis, statistics and cache replay.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <initializer_list>

#include "experts/routing_trace.hpp"
#include "experts/trace_replay.hpp"
#include "experts/trace_synth.hpp"
#include "firewall.hpp"

namespace {

// 0.2's layout ended at seed (docs/errors.md: earlier layouts are accepted).
constexpr std::initializer_list<size_t> kEarlierSynthSizes = {offsetof(moestream_trace_synth_params, window)};

// The policy the engine uses when asked for MOESTREAM_CACHE_AUTO.
constexpr moe::CachePolicyKind kDefaultPolicy = moe::CachePolicyKind::reuse_aware;

}  // namespace

extern "C" {

MOESTREAM_API void moestream_trace_synth_params_init(moestream_trace_synth_params *p) {
    if (!p) return;
    *p = moestream_trace_synth_params{};
    p->struct_size = sizeof *p;
    p->reuse = -1;
    p->skew = -1;
    p->seed = 1;
}

MOESTREAM_API int moestream_trace_synth(const moestream_trace_synth_params *p, const char *path) {
    return moe::capi::guarded(__func__, [&] {
        moe::capi::require(p, "params");
        moe::capi::require(path, "path");
        moe::capi::require_struct_size(p->struct_size, sizeof *p, kEarlierSynthSizes, "moestream_trace_synth_params");
        moe::SynthConfig c;
        if (p->heat_path) {
            moe::load_heat_file(p->heat_path, c);
        } else {
            if (p->n_layer > 0) c.n_layer = static_cast<uint32_t>(p->n_layer);
            if (p->n_expert > 0) c.n_expert = static_cast<uint32_t>(p->n_expert);
        }
        if (p->n_layer < 0 || p->n_expert < 0 || p->n_expert_used < 0 || p->n_tokens < 0)
            moe::fail(moe::Status::invalid_argument, "negative trace shape");
        if (p->heat_path && ((p->n_layer && uint32_t(p->n_layer) != c.n_layer) ||
                             (p->n_expert && uint32_t(p->n_expert) != c.n_expert)))
            moe::fail(moe::Status::invalid_argument, "%s: heat has %u layers x %u experts; the shape cannot be overridden",
                      p->heat_path, c.n_layer, c.n_expert);
        if (p->n_expert_used > 0) c.n_expert_used = static_cast<uint32_t>(p->n_expert_used);
        if (p->n_tokens > 0) c.n_tokens = static_cast<uint64_t>(p->n_tokens);
        // Only a negative value asks for the default: NaN must reach the range checks and be refused.
        if (!(p->reuse < 0)) c.reuse = p->reuse;
        if (!(p->skew < 0)) c.skew = p->skew;
        if (p->bytes_per_expert) c.bytes_per_expert = p->bytes_per_expert;
        c.seed = p->seed;
        if (p->struct_size == sizeof *p) c.window = p->window, c.recall = p->recall;
        moe::write_routing_trace(path, moe::synthesize_trace(c));
    });
}

MOESTREAM_API void moestream_trace_info_init(moestream_trace_info *info) {
    if (!info) return;
    *info = moestream_trace_info{};
    info->struct_size = sizeof *info;
}

MOESTREAM_API int moestream_trace_info_get(const char *path, moestream_trace_info *out) {
    return moe::capi::guarded(__func__, [&] {
        moe::capi::require(path, "path");
        moe::capi::require(out, "out");
        moe::capi::require_struct_size(out->struct_size, sizeof *out, "moestream_trace_info");
        const moe::RoutingTrace t = moe::read_routing_trace(path);
        const moe::TraceStats s = moe::measure_trace(t);
        out->n_layer = static_cast<int32_t>(t.header.n_layer);
        out->n_expert = static_cast<int32_t>(t.header.n_expert);
        out->n_expert_used = static_cast<int32_t>(t.header.n_expert_used);
        out->n_tokens = static_cast<int64_t>(t.n_tokens);
        out->bytes_per_expert = t.header.bytes_per_expert;
        out->expert_bytes = moe::trace_expert_bytes(t.header);
        out->reuse = s.reuse;
        out->top20_share_median = s.median_top20;
        out->top20_share_min = s.top20_share.empty() ? 0 : *std::min_element(s.top20_share.begin(), s.top20_share.end());
        out->top20_share_max = s.top20_share.empty() ? 0 : *std::max_element(s.top20_share.begin(), s.top20_share.end());
    });
}

MOESTREAM_API void moestream_replay_params_init(moestream_replay_params *p) {
    if (!p) return;
    *p = moestream_replay_params{};
    p->struct_size = sizeof *p;
    p->warmup_share = -1;
}

MOESTREAM_API void moestream_replay_result_init(moestream_replay_result *r) {
    if (!r) return;
    *r = moestream_replay_result{};
    r->struct_size = sizeof *r;
}

MOESTREAM_API const char *moestream_cache_policy_name(int policy) {
    switch (policy) {
    case MOESTREAM_CACHE_AUTO: return "auto";
    case MOESTREAM_CACHE_LRU: return "lru";
    case MOESTREAM_CACHE_LFU_DECAY: return "lfu-decay";
    case MOESTREAM_CACHE_PINNED_HOT: return "pinned-hot";
    case MOESTREAM_CACHE_REUSE_AWARE: return "reuse-aware";
    case MOESTREAM_REPLAY_BELADY: return "belady";
    default: return "?";
    }
}

MOESTREAM_API int moestream_trace_replay(const moestream_replay_params *p, moestream_replay_result *out) {
    return moe::capi::guarded(__func__, [&] {
        moe::capi::require(p, "params");
        moe::capi::require(out, "out");
        // The size first: a struct of another layout may not hold trace_path where this one does.
        moe::capi::require_struct_size(p->struct_size, sizeof *p, "moestream_replay_params");
        moe::capi::require(p->trace_path, "params->trace_path");
        moe::capi::require_struct_size(out->struct_size, sizeof *out, "moestream_replay_result");
        if (p->warmup_share > 1 || std::isnan(p->warmup_share))
            moe::fail(moe::Status::invalid_argument, "warmup_share %g is above 1", p->warmup_share);
        const moe::RoutingTrace t = moe::read_routing_trace(p->trace_path);
        const double share = p->warmup_share < 0 ? 0.5 : p->warmup_share;
        const uint64_t warmup = static_cast<uint64_t>(std::floor(share * double(t.n_tokens)));
        const uint32_t capacity = moe::replay_capacity(t, p->cache_bytes);
        moe::ReplayResult r;
        int32_t policy = p->cache_policy;
        if (policy == MOESTREAM_REPLAY_BELADY) {
            r = moe::replay_belady(t, capacity, warmup);
        } else {
            moe::CachePolicyKind kind = kDefaultPolicy;
            switch (policy) {
            case MOESTREAM_CACHE_AUTO: break;
            case MOESTREAM_CACHE_LRU: kind = moe::CachePolicyKind::lru; break;
            case MOESTREAM_CACHE_LFU_DECAY: kind = moe::CachePolicyKind::lfu_decay; break;
            case MOESTREAM_CACHE_PINNED_HOT: kind = moe::CachePolicyKind::pinned_hot; break;
            case MOESTREAM_CACHE_REUSE_AWARE: kind = moe::CachePolicyKind::reuse_aware; break;
            default: moe::fail(moe::Status::invalid_argument, "unknown cache policy %d", policy);
            }
            policy = static_cast<int32_t>(kind);
            r = moe::replay_policy(t, kind, capacity, warmup);
        }
        out->cache_policy = policy;
        out->capacity_slots = r.capacity;
        out->accesses = r.accesses;
        out->hits = r.hits;
        out->misses = r.misses;
        out->bytes_read = r.bytes_read;
        out->hit_rate = r.hit_rate();
    });
}

}  // extern "C"
