// Engine counters behind moestream_stats. Written by the thread running step
// (and the I/O completion path under the engine's own synchronisation); read by
// moestream_stats_get between steps.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "moestream.h"

namespace moe {

struct Stats {
    uint64_t tokens = 0;
    uint64_t steps = 0;
    uint64_t compute_ns = 0;
    uint64_t io_wait_ns = 0;
    uint64_t step_ns = 0;
    uint64_t bytes_read_demand = 0;
    uint64_t bytes_read_prefetch = 0;
    uint64_t bytes_read_wasted = 0;
    uint64_t cache_hits = 0;
    uint64_t cache_misses = 0;
    uint64_t prefetch_issued = 0;
    uint64_t prefetch_useful = 0;
    uint64_t evictions = 0;
    uint64_t attention_ns = 0;
    uint64_t moe_ns = 0;  // without the waits for expert bytes
    std::array<uint64_t, MOESTREAM_MAX_LAYERS> layer_hits{};
    std::array<uint64_t, MOESTREAM_MAX_LAYERS> layer_misses{};

    void reset() { *this = Stats{}; }
};

}  // namespace moe
