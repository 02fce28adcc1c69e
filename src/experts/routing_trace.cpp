#include "experts/routing_trace.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/regular_file.hpp"

namespace moe {
namespace {

constexpr char kMagic[8] = {'M', 'O', 'E', 'T', 'R', 'A', 'C', 'E'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 64;
constexpr uint64_t kRowsUnknown = ~0ull;

template <typename T>
void store(uint8_t *p, T v) {
    std::memcpy(p, &v, sizeof v);
}
template <typename T>
T load(const uint8_t *p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

size_t row_bytes(uint32_t k) { return 8 + 2 * static_cast<size_t>(k); }

void encode_header(uint8_t *h, const TraceHeader &th, uint64_t rows) {
    std::memset(h, 0, kHeaderBytes);
    std::memcpy(h, kMagic, 8);
    store<uint32_t>(h + 8, kVersion);
    store<uint32_t>(h + 12, th.n_layer);
    store<uint32_t>(h + 16, th.n_expert);
    store<uint32_t>(h + 20, th.n_expert_used);
    store<uint64_t>(h + 24, th.bytes_per_expert);
    store<uint64_t>(h + 32, rows);
}

void check_header(const TraceHeader &h, const std::string &what) {
    if (!valid_trace_header(h))
        fail(Status::bad_format, "%s: bad trace header (%u layers, %u experts, top-%u, %llu bytes per expert; allowed: %s)",
             what.c_str(), h.n_layer, h.n_expert, h.n_expert_used, static_cast<unsigned long long>(h.bytes_per_expert),
             trace_header_limits().c_str());
}

}  // namespace

std::string trace_header_limits() {
    return format("1-%u layers, 1-%u experts, at most %llu layer x expert keys, 1 <= k <= experts, "
                  "all experts' bytes within 64 bits",
                  kMaxTraceLayers, kTraceNoExpert - 1u, static_cast<unsigned long long>(kMaxTraceKeys));
}

bool valid_trace_header(const TraceHeader &h) {
    uint64_t expert_bytes;
    return h.n_layer >= 1 && h.n_layer <= kMaxTraceLayers && h.n_expert >= 1 && h.n_expert < kTraceNoExpert &&
           h.n_expert_used >= 1 && h.n_expert_used <= h.n_expert && uint64_t(h.n_layer) * h.n_expert <= kMaxTraceKeys &&
           !__builtin_mul_overflow(uint64_t(h.n_layer) * h.n_expert, h.bytes_per_expert, &expert_bytes);
}

uint64_t trace_expert_bytes(const TraceHeader &h) { return uint64_t(h.n_layer) * h.n_expert * h.bytes_per_expert; }

RoutingTraceWriter::RoutingTraceWriter(const std::string &path, const TraceHeader &header)
    : path_(path), header_(header) {
    check_header(header, path);
    file_ = std::make_unique<AtomicFile>(path);
    uint8_t h[kHeaderBytes];
    encode_header(h, header_, kRowsUnknown);
    buffer_.assign(h, h + kHeaderBytes);
    buffer_.reserve(1 << 16);
}

// Not closed: the writer is being unwound past (an exception left its owner),
// so the rows may be a fragment; the AtomicFile removes them unpublished.
RoutingTraceWriter::~RoutingTraceWriter() = default;

void RoutingTraceWriter::record(uint64_t token, uint32_t layer, std::span<const int32_t> experts) {
    if (!file_) fail(Status::internal, "%s: routing trace already closed", path_.c_str());
    if (layer >= header_.n_layer || experts.size() > header_.n_expert_used || token > 0xFFFFFFFFull)
        fail(Status::internal, "%s: trace row out of range (token %llu, layer %u, %zu experts)", path_.c_str(),
             static_cast<unsigned long long>(token), layer, experts.size());
    const size_t at = buffer_.size();
    buffer_.resize(at + row_bytes(header_.n_expert_used));
    uint8_t *p = buffer_.data() + at;
    store<uint32_t>(p, static_cast<uint32_t>(token));
    store<uint16_t>(p + 4, static_cast<uint16_t>(layer));
    store<uint16_t>(p + 6, static_cast<uint16_t>(experts.size()));
    for (uint32_t i = 0; i < header_.n_expert_used; ++i) {
        const int32_t e = i < experts.size() ? experts[i] : -1;
        store<uint16_t>(p + 8 + 2 * i, (e < 0 || uint32_t(e) >= header_.n_expert) ? kTraceNoExpert : uint16_t(e));
    }
    ++rows_;
    if (buffer_.size() >= (1 << 16)) flush();
}

void RoutingTraceWriter::flush() {
    // At an explicit offset: a write that fails part way (a full disk) throws
    // with the buffer kept, and the next flush writes it again over the same
    // bytes; appending would leave the fragment in front of the rows again.
    file_->write_at(buffer_.data(), buffer_.size(), written_);
    written_ += buffer_.size();
    buffer_.clear();
}

void RoutingTraceWriter::rewind(uint64_t rows) {
    if (!file_ || rows >= rows_) return;
    // Rows have one size, so row r starts at kHeaderBytes + r * row bytes.
    const uint64_t end = kHeaderBytes + rows * row_bytes(header_.n_expert_used);
    if (end >= written_) {
        buffer_.resize(size_t(end - written_));
    } else {
        // Already in the file: later rows are written over them, the rest cut at close.
        buffer_.clear();
        written_ = end;
    }
    rows_ = rows;
}

void RoutingTraceWriter::close() {
    if (!file_) return;
    try {
        flush();
        // Cuts rows a rewind dropped after they reached the file (a no-op when none did).
        file_->truncate(written_);
        uint8_t h[kHeaderBytes];
        encode_header(h, header_, rows_);
        file_->write_at(h, kHeaderBytes, 0);
        file_->commit();
    } catch (...) {
        file_.reset();  // a trace that could not be finished is not kept
        throw;
    }
    file_.reset();
}

RoutingTrace RoutingTrace::dense(const TraceHeader &header, uint64_t n_tokens) {
    RoutingTrace t;
    t.header = header;
    t.n_tokens = n_tokens;
    t.token_rows.resize(n_tokens + 1);
    for (uint64_t tok = 0; tok <= n_tokens; ++tok) t.token_rows[tok] = tok * header.n_layer;
    t.row_layer.resize(n_tokens * header.n_layer);
    for (size_t r = 0; r < t.row_layer.size(); ++r) t.row_layer[r] = static_cast<uint16_t>(r % header.n_layer);
    t.ids.assign(t.row_layer.size() * header.n_expert_used, kTraceNoExpert);
    return t;
}

void RoutingTrace::truncate(uint64_t tokens) {
    if (tokens >= n_tokens) return;
    n_tokens = tokens;
    token_rows.resize(tokens + 1);
    const uint64_t rows = token_rows[tokens];
    row_layer.resize(rows);
    ids.resize(rows * header.n_expert_used);
}

size_t RoutingTrace::row_of(uint64_t token, uint32_t layer) const {
    const uint64_t begin = token_rows[token], end = token_rows[token + 1];
    if (end - begin == header.n_layer) return begin + layer;  // a row for every layer: the usual case
    const auto first = row_layer.begin() + long(begin), last = row_layer.begin() + long(end);
    const auto it = std::lower_bound(first, last, layer);
    return it != last && *it == layer ? size_t(it - row_layer.begin()) : kNoRow;
}

std::span<const uint16_t> RoutingTrace::experts(uint64_t token, uint32_t layer) const {
    const size_t r = row_of(token, layer), k = header.n_expert_used;
    if (r == kNoRow) return {};
    return {ids.data() + r * k, k};
}

std::span<uint16_t> RoutingTrace::experts(uint64_t token, uint32_t layer) {
    const std::span<const uint16_t> row = std::as_const(*this).experts(token, layer);
    return {const_cast<uint16_t *>(row.data()), row.size()};
}

namespace {

std::vector<uint8_t> read_whole_file(const std::string &path) {
    const FilePtr f = open_regular_file_or_fail(path, "routing trace");
    std::vector<uint8_t> data;
    uint8_t chunk[1 << 16];
    for (size_t n; (n = std::fread(chunk, 1, sizeof chunk, f.get())) > 0;) data.insert(data.end(), chunk, chunk + n);
    if (std::ferror(f.get())) fail(Status::io, "%s: read error", path.c_str());
    return data;
}

// Validates the header and returns the number of complete rows to read.
uint64_t read_header(const std::vector<uint8_t> &data, const std::string &path, TraceHeader &th) {
    if (data.size() < kHeaderBytes || std::memcmp(data.data(), kMagic, 8) != 0)
        fail(Status::bad_format, "%s: not a moestream routing trace (magic MOETRACE missing)", path.c_str());
    const uint8_t *h = data.data();
    if (load<uint32_t>(h + 8) != kVersion)
        fail(Status::bad_format, "%s: routing trace version %u (this build reads %u)", path.c_str(),
             load<uint32_t>(h + 8), kVersion);
    th.n_layer = load<uint32_t>(h + 12);
    th.n_expert = load<uint32_t>(h + 16);
    th.n_expert_used = load<uint32_t>(h + 20);
    th.bytes_per_expert = load<uint64_t>(h + 24);
    check_header(th, path);
    const size_t rb = row_bytes(th.n_expert_used);
    const uint64_t rows = load<uint64_t>(h + 32), available = (data.size() - kHeaderBytes) / rb;
    if (rows == kRowsUnknown) return available;  // recording was interrupted: keep the complete rows
    if (rows != available || (data.size() - kHeaderBytes) % rb)
        fail(Status::bad_format, "%s: header says %llu rows, file holds %llu", path.c_str(),
             static_cast<unsigned long long>(rows), static_cast<unsigned long long>(available));
    return rows;
}

struct RowRef {
    uint32_t token;
    uint16_t layer;
    uint64_t index;  // position in the file: of two rows for one token and layer, the later one counts
};

// Checks row `r` against the header and the row count and returns where it belongs.
RowRef check_row(const uint8_t *p, uint64_t r, uint64_t n_rows, const TraceHeader &th, const std::string &path) {
    const auto row = static_cast<unsigned long long>(r);
    const uint32_t token = load<uint32_t>(p), layer = load<uint16_t>(p + 4), n = load<uint16_t>(p + 6);
    // Tokens are numbered from 0 in the order processed and each has rows, so
    // a token index is below the row count; this bounds the reader's memory.
    if (token >= n_rows)
        fail(Status::bad_format, "%s: row %llu: token %u is not below the row count %llu", path.c_str(), row, token,
             static_cast<unsigned long long>(n_rows));
    if (layer >= th.n_layer || n > th.n_expert_used)
        fail(Status::bad_format, "%s: row %llu: layer %u / %u experts out of range", path.c_str(), row, layer, n);
    auto id = [p](size_t i) { return load<uint16_t>(p + 8 + 2 * i); };
    for (size_t i = 0; i < th.n_expert_used; ++i) {
        const uint16_t e = id(i);
        if (e == kTraceNoExpert) continue;
        // The row's experts are its first n entries; the rest are unused.
        if (i >= n)
            fail(Status::bad_format, "%s: row %llu: entry %zu is expert %u, past the row's %u experts (unused entries "
                 "are 0xFFFF)", path.c_str(), row, i, e, n);
        if (e >= th.n_expert)
            fail(Status::bad_format, "%s: row %llu: expert %u >= %u", path.c_str(), row, e, th.n_expert);
        // Duplicates within a row would make the access count ambiguous.
        for (size_t j = 0; j < i; ++j)
            if (id(j) == e)
                fail(Status::bad_format, "%s: token %u layer %u lists expert %u twice", path.c_str(), token, layer, e);
    }
    return {token, static_cast<uint16_t>(layer), r};
}

}  // namespace

RoutingTrace read_routing_trace(const std::string &path) {
    const std::vector<uint8_t> data = read_whole_file(path);
    RoutingTrace t;
    const uint64_t n_rows = read_header(data, path, t.header);
    const size_t rb = row_bytes(t.header.n_expert_used), k = t.header.n_expert_used;
    const uint8_t *rows = data.data() + kHeaderBytes;
    std::vector<RowRef> order;
    order.reserve(n_rows);
    for (uint64_t r = 0; r < n_rows; ++r) order.push_back(check_row(rows + r * rb, r, n_rows, t.header, path));
    std::sort(order.begin(), order.end(), [](const RowRef &a, const RowRef &b) {
        return a.token != b.token ? a.token < b.token : a.layer != b.layer ? a.layer < b.layer : a.index < b.index;
    });
    t.n_tokens = order.empty() ? 0 : uint64_t(order.back().token) + 1;
    t.token_rows.assign(t.n_tokens + 1, 0);
    for (size_t i = 0; i < order.size(); ++i) {
        const RowRef &row = order[i];
        if (i + 1 < order.size() && order[i + 1].token == row.token && order[i + 1].layer == row.layer) continue;
        ++t.token_rows[row.token + 1];
        t.row_layer.push_back(row.layer);
        for (size_t e = 0; e < k; ++e) t.ids.push_back(load<uint16_t>(rows + row.index * rb + 8 + 2 * e));
    }
    for (uint64_t tok = 0; tok < t.n_tokens; ++tok) t.token_rows[tok + 1] += t.token_rows[tok];
    return t;
}

void write_routing_trace(const std::string &path, const RoutingTrace &trace) {
    RoutingTraceWriter w(path, trace.header);
    std::vector<int32_t> row;
    for (uint64_t t = 0; t < trace.n_tokens; ++t)
        for (uint32_t l = 0; l < trace.header.n_layer; ++l) {
            row.clear();
            for (uint16_t e : trace.experts(t, l))
                if (e != kTraceNoExpert) row.push_back(e);
            w.record(t, l, row);
        }
    w.close();
}

TraceStats measure_trace(const RoutingTrace &trace) {
    TraceStats s;
    const auto &h = trace.header;
    uint64_t reused = 0, counted = 0;
    std::vector<uint64_t> counts(h.n_expert);
    for (uint32_t l = 0; l < h.n_layer; ++l) {
        std::fill(counts.begin(), counts.end(), 0);
        uint64_t total = 0;
        for (uint64_t t = 0; t < trace.n_tokens; ++t) {
            auto cur = trace.experts(t, l);
            for (uint16_t e : cur) {
                if (e == kTraceNoExpert) continue;
                ++counts[e];
                ++total;
                if (t > 0) {
                    auto prev = trace.experts(t - 1, l);
                    reused += std::find(prev.begin(), prev.end(), e) != prev.end();
                    ++counted;
                }
            }
        }
        std::sort(counts.begin(), counts.end(), std::greater<>());
        const size_t top = std::max<size_t>(1, (h.n_expert + 2) / 5);  // 20%, rounded
        uint64_t top_sum = 0;
        for (size_t i = 0; i < top; ++i) top_sum += counts[i];
        s.top20_share.push_back(total ? double(top_sum) / double(total) : 0.0);
    }
    s.reuse = counted ? double(reused) / double(counted) : 0.0;
    std::vector<double> sorted = s.top20_share;
    std::sort(sorted.begin(), sorted.end());
    if (!sorted.empty())
        s.median_top20 = sorted.size() % 2 ? sorted[sorted.size() / 2]
                                           : 0.5 * (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]);
    return s;
}

}  // namespace moe
