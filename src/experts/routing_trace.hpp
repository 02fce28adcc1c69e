// Routing traces: which experts every token used in every layer
// (format: docs/trace-format.md). Written by the engine while it runs
// (RoutingTraceWriter), by the synthesiser, and read by the replay simulator.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace moe {

constexpr uint16_t kTraceNoExpert = 0xFFFF;

struct TraceHeader {
    uint32_t n_layer = 0;
    uint32_t n_expert = 0;
    uint32_t n_expert_used = 0;       // k: experts per row
    uint64_t bytes_per_expert = 0;    // gate+up+down of one expert (for bytes-read figures)
};

// A whole trace in memory, token-major: experts(t, l) is a span of k ids
// (kTraceNoExpert pads rows with fewer experts).
struct RoutingTrace {
    TraceHeader header;
    uint64_t n_tokens = 0;
    std::vector<uint16_t> ids;  // n_tokens * n_layer * k

    std::span<const uint16_t> experts(uint64_t token, uint32_t layer) const {
        const size_t k = header.n_expert_used;
        return {ids.data() + (token * header.n_layer + layer) * k, k};
    }
    std::span<uint16_t> experts(uint64_t token, uint32_t layer) {
        const size_t k = header.n_expert_used;
        return {ids.data() + (token * header.n_layer + layer) * k, k};
    }
};

// Streams rows to a file. Rows may arrive in any order (a batched step
// visits layer-major); the reader sorts them. Not thread-safe.
// The rows go to PATH.tmp, renamed to PATH when the trace is finished, so
// PATH never holds a partial trace and an earlier file there stays until
// then; a trace that cannot be finished is removed.
class RoutingTraceWriter {
public:
    RoutingTraceWriter(const std::string &path, const TraceHeader &header);
    ~RoutingTraceWriter();  // closes (errors ignored; call close() to see them)
    RoutingTraceWriter(const RoutingTraceWriter &) = delete;
    RoutingTraceWriter &operator=(const RoutingTraceWriter &) = delete;

    // One token's experts in one layer (at most k; order kept).
    void record(uint64_t token, uint32_t layer, std::span<const int32_t> experts);
    // Flushes, writes the row count into the header, closes and renames the
    // file to PATH. Throws on I/O errors (after removing PATH.tmp).
    void close();

private:
    void flush();
    void finish();  // everything close() does before the rename
    std::string temp_path() const { return path_ + ".tmp"; }
    std::string path_;
    TraceHeader header_;
    std::FILE *file_ = nullptr;
    std::vector<uint8_t> buffer_;
    uint64_t rows_ = 0;
};

// Reads and validates a trace; throws bad_format / io naming the path.
RoutingTrace read_routing_trace(const std::string &path);
// Writes a complete in-memory trace.
void write_routing_trace(const std::string &path, const RoutingTrace &trace);

// Statistics the synthesiser targets, measured on a trace.
struct TraceStats {
    double reuse = 0;                // mean over (token>0, layer) of |S_t ∩ S_{t-1}| / |S_t|
    std::vector<double> top20_share; // per layer: share of routings taken by the top 20% of experts
    double median_top20 = 0;
};
TraceStats measure_trace(const RoutingTrace &trace);

}  // namespace moe
