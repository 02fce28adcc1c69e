// Routing traces: which experts every token used in every layer
// (format: docs/trace-format.md). Written by the engine while it runs
// (RoutingTraceWriter), by the synthesiser, and read by the replay simulator.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace moe {

class AtomicFile;

constexpr uint16_t kTraceNoExpert = 0xFFFF;

struct TraceHeader {
    uint32_t n_layer = 0;
    uint32_t n_expert = 0;
    uint32_t n_expert_used = 0;       // k: experts per row
    uint64_t bytes_per_expert = 0;    // gate+up+down of one expert (for bytes-read figures)
};

// The headers a trace may have (docs/trace-format.md). Replay keeps state for
// every (layer, expert) key, about 50 bytes each, so the key count is bounded.
constexpr uint32_t kMaxTraceLayers = 4096;
constexpr uint64_t kMaxTraceKeys = uint64_t(1) << 20;  // n_layer * n_expert
// 1 <= n_layer <= kMaxTraceLayers, 1 <= n_expert < kTraceNoExpert,
// 1 <= k <= n_expert, n_layer * n_expert <= kMaxTraceKeys, and the bytes of
// all experts (trace_expert_bytes) fit in 64 bits.
bool valid_trace_header(const TraceHeader &h);
// What valid_trace_header requires, in words, for error messages.
std::string trace_header_limits();
// n_layer * n_expert * bytes_per_expert of a valid header.
uint64_t trace_expert_bytes(const TraceHeader &h);

// A whole trace in memory: its rows sorted by (token, layer), k expert ids
// each (kTraceNoExpert pads rows with fewer experts). Memory follows the rows
// present, so a file cannot make a reader hold more than it stores.
struct RoutingTrace {
    TraceHeader header;
    uint64_t n_tokens = 0;
    std::vector<uint64_t> token_rows{0};  // n_tokens + 1: token t's rows are [token_rows[t], token_rows[t + 1])
    std::vector<uint16_t> row_layer;      // per row; ascending and unique within a token
    std::vector<uint16_t> ids;            // k per row

    // A row of kTraceNoExpert for every token and layer, to be filled in.
    static RoutingTrace dense(const TraceHeader &header, uint64_t n_tokens);

    // Keeps the first `tokens` tokens (the fields depend on each other: cut
    // them together).
    void truncate(uint64_t tokens);

    // The token's k experts in `layer`, or an empty span when it has no row there.
    std::span<const uint16_t> experts(uint64_t token, uint32_t layer) const;
    std::span<uint16_t> experts(uint64_t token, uint32_t layer);

private:
    size_t row_of(uint64_t token, uint32_t layer) const;  // kNoRow when absent
    static constexpr size_t kNoRow = ~size_t(0);
};

// Streams rows to a file. Rows may arrive in any order (a batched step
// visits layer-major); the reader sorts them. Not thread-safe.
// The rows go to a temporary file of this writer's own beside PATH (an
// AtomicFile), renamed to PATH by close(), so PATH never holds a partial trace,
// an earlier file there stays until then, and two writers to one PATH do not
// mix their rows (the last to close wins). A trace that cannot be finished,
// or whose writer is destroyed without close(), is removed.
class RoutingTraceWriter {
public:
    RoutingTraceWriter(const std::string &path, const TraceHeader &header);
    ~RoutingTraceWriter();  // without close(): discards the rows
    RoutingTraceWriter(const RoutingTraceWriter &) = delete;
    RoutingTraceWriter &operator=(const RoutingTraceWriter &) = delete;

    // One token's experts in one layer (at most k; order kept). Throws
    // moe::Error(io) when the rows cannot be written (a full disk); the row
    // is kept, and a later record() or close() writes it again.
    void record(uint64_t token, uint32_t layer, std::span<const int32_t> experts);
    // Rows recorded so far, and a way back to that count: the rows recorded
    // after it are dropped (those of a step that failed, which keeps none of
    // its tokens), whether still buffered or already in the file.
    uint64_t rows() const { return rows_; }
    void rewind(uint64_t rows);
    // Flushes, writes the row count into the header and renames the file to
    // PATH. Throws on I/O errors (after removing the temporary file).
    void close();

private:
    void flush();
    std::string path_;
    TraceHeader header_;
    std::unique_ptr<AtomicFile> file_;  // null once closed
    std::vector<uint8_t> buffer_;
    uint64_t written_ = 0;  // bytes of rows in the file; buffer_ goes after them, anything else is cut at close
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
