// libFuzzer target for the routing trace reader (src/experts/routing_trace.cpp)
// and what reads a trace next: its statistics and the cache replay of every
// policy and of Belady.
//
// The reader must either throw moe::Error (never Status::internal) or return a
// trace whose index fields agree with each other and with the header. Small
// traces then go through measure_trace and replay, which must account for
// every access.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/error.hpp"
#include "experts/routing_trace.hpp"
#include "experts/trace_replay.hpp"
#include "input_file.hpp"

namespace {

using moe::RoutingTrace;

void require(bool ok) {
    if (!ok) __builtin_trap();
}

void check_trace(const RoutingTrace &t) {
    const moe::TraceHeader &h = t.header;
    require(moe::valid_trace_header(h));
    require(t.token_rows.size() == t.n_tokens + 1 && t.token_rows.front() == 0 &&
            t.token_rows.back() == t.row_layer.size() && t.ids.size() == t.row_layer.size() * h.n_expert_used);
    for (uint64_t tok = 0; tok < t.n_tokens; ++tok) {
        const uint64_t begin = t.token_rows[tok], end = t.token_rows[tok + 1];
        require(begin <= end && end - begin <= h.n_layer);
        for (uint64_t r = begin; r < end; ++r) {
            require(t.row_layer[r] < h.n_layer && (r == begin || t.row_layer[r] > t.row_layer[r - 1]));
            const auto row = t.experts(tok, t.row_layer[r]);
            require(row.size() == h.n_expert_used && row.data() == t.ids.data() + r * h.n_expert_used);
            for (size_t i = 0; i < row.size(); ++i) {
                require(row[i] == moe::kTraceNoExpert || row[i] < h.n_expert);
                if (row[i] != moe::kTraceNoExpert)
                    require(std::count(row.begin(), row.end(), row[i]) == 1);
            }
        }
    }
}

void check_replay(const moe::ReplayResult &r, uint32_t capacity) {
    require(r.hits + r.misses == r.accesses && r.capacity == capacity);
}

// Replays of every policy on traces small enough to keep an input fast.
void replay_all(const RoutingTrace &t) {
    const uint64_t keys = uint64_t(t.header.n_layer) * t.header.n_expert;
    if (t.row_layer.size() > 4096 || keys > 4096) return;
    const uint64_t warmup = t.n_tokens / 2;
    for (uint64_t share : {4, 2}) {
        const uint32_t capacity = moe::replay_capacity(t, trace_expert_bytes(t.header) / share);
        for (moe::CachePolicyKind kind : {moe::CachePolicyKind::lru, moe::CachePolicyKind::lfu_decay,
                                          moe::CachePolicyKind::pinned_hot, moe::CachePolicyKind::reuse_aware})
            check_replay(moe::replay_policy(t, kind, capacity, warmup), capacity);
        check_replay(moe::replay_belady(t, capacity, warmup), capacity);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static moe::fuzz::InputFile input;
    try {
        const RoutingTrace trace = moe::read_routing_trace(input.holding(data, size));
        check_trace(trace);
        const moe::TraceStats stats = moe::measure_trace(trace);
        require(stats.top20_share.size() == trace.header.n_layer && stats.reuse >= 0 && stats.reuse <= 1);
        replay_all(trace);
    } catch (const moe::Error &e) {
        require(e.status() != moe::Status::internal);  // the reader blamed itself
    }
    return 0;
}
