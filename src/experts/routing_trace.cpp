#include "experts/routing_trace.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/error.hpp"

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
    if (h.n_layer == 0 || h.n_layer > 4096 || h.n_expert == 0 || h.n_expert >= kTraceNoExpert ||
        h.n_expert_used == 0 || h.n_expert_used > h.n_expert)
        fail(Status::bad_format, "%s: bad trace shape (%u layers, %u experts, %u per token)", what.c_str(), h.n_layer,
             h.n_expert, h.n_expert_used);
}

}  // namespace

RoutingTraceWriter::RoutingTraceWriter(const std::string &path, const TraceHeader &header)
    : path_(path), header_(header) {
    check_header(header, path);
    file_ = std::fopen(temp_path().c_str(), "wb");
    if (!file_) fail_errno(errno, "%s: cannot create routing trace", temp_path().c_str());
    uint8_t h[kHeaderBytes];
    encode_header(h, header_, kRowsUnknown);
    buffer_.assign(h, h + kHeaderBytes);
    buffer_.reserve(1 << 16);
}

RoutingTraceWriter::~RoutingTraceWriter() {
    try {
        close();
    } catch (...) {
    }
}

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
    if (!buffer_.empty() && std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size())
        fail_errno(errno, "%s: cannot write routing trace", path_.c_str());
    buffer_.clear();
}

void RoutingTraceWriter::close() {
    if (!file_) return;
    try {
        finish();
    } catch (...) {
        if (file_) std::fclose(file_);
        file_ = nullptr;
        ::unlink(temp_path().c_str());  // a trace that could not be finished is not kept
        throw;
    }
    if (::rename(temp_path().c_str(), path_.c_str()) != 0) {
        const int err = errno;
        ::unlink(temp_path().c_str());
        fail_errno(err, "%s: cannot rename routing trace %s", path_.c_str(), temp_path().c_str());
    }
}

void RoutingTraceWriter::finish() {
    flush();
    uint8_t h[kHeaderBytes];
    encode_header(h, header_, rows_);
    std::FILE *f = file_;
    const bool ok = std::fseek(f, 0, SEEK_SET) == 0 && std::fwrite(h, 1, kHeaderBytes, f) == kHeaderBytes;
    const int err = errno;
    file_ = nullptr;
    if (std::fclose(f) != 0 || !ok) fail_errno(ok ? errno : err, "%s: cannot finish routing trace", path_.c_str());
}

RoutingTrace read_routing_trace(const std::string &path) {
    std::FILE *f = std::fopen(path.c_str(), "rb");
    if (!f) fail_errno(errno, "%s: cannot open routing trace", path.c_str());
    std::vector<uint8_t> data;
    uint8_t chunk[1 << 16];
    for (size_t n; (n = std::fread(chunk, 1, sizeof chunk, f)) > 0;) data.insert(data.end(), chunk, chunk + n);
    const bool read_error = std::ferror(f);
    std::fclose(f);
    if (read_error) fail(Status::io, "%s: read error", path.c_str());
    if (data.size() < kHeaderBytes || std::memcmp(data.data(), kMagic, 8) != 0)
        fail(Status::bad_format, "%s: not a moestream routing trace (magic MOETRACE missing)", path.c_str());
    const uint8_t *h = data.data();
    if (load<uint32_t>(h + 8) != kVersion)
        fail(Status::bad_format, "%s: routing trace version %u (this build reads %u)", path.c_str(),
             load<uint32_t>(h + 8), kVersion);
    RoutingTrace t;
    t.header.n_layer = load<uint32_t>(h + 12);
    t.header.n_expert = load<uint32_t>(h + 16);
    t.header.n_expert_used = load<uint32_t>(h + 20);
    t.header.bytes_per_expert = load<uint64_t>(h + 24);
    check_header(t.header, path);
    const size_t rb = row_bytes(t.header.n_expert_used);
    uint64_t rows = load<uint64_t>(h + 32);
    const uint64_t available = (data.size() - kHeaderBytes) / rb;
    if (rows == kRowsUnknown) rows = available;  // recording was interrupted: keep the complete rows
    else if (rows != available || (data.size() - kHeaderBytes) % rb)
        fail(Status::bad_format, "%s: header says %llu rows, file holds %llu", path.c_str(),
             static_cast<unsigned long long>(rows), static_cast<unsigned long long>(available));
    uint64_t max_token = 0;
    for (uint64_t r = 0; r < rows; ++r) max_token = std::max<uint64_t>(max_token, load<uint32_t>(h + kHeaderBytes + r * rb));
    t.n_tokens = rows ? max_token + 1 : 0;
    const size_t k = t.header.n_expert_used;
    t.ids.assign(t.n_tokens * t.header.n_layer * k, kTraceNoExpert);
    for (uint64_t r = 0; r < rows; ++r) {
        const uint8_t *p = h + kHeaderBytes + r * rb;
        const uint32_t token = load<uint32_t>(p), layer = load<uint16_t>(p + 4), n = load<uint16_t>(p + 6);
        if (layer >= t.header.n_layer || n > k)
            fail(Status::bad_format, "%s: row %llu: layer %u / %u experts out of range", path.c_str(),
                 static_cast<unsigned long long>(r), layer, n);
        auto out = t.experts(token, layer);
        for (size_t i = 0; i < k; ++i) {
            const uint16_t e = load<uint16_t>(p + 8 + 2 * i);
            if (e != kTraceNoExpert && e >= t.header.n_expert)
                fail(Status::bad_format, "%s: row %llu: expert %u >= %u", path.c_str(), static_cast<unsigned long long>(r),
                     e, t.header.n_expert);
            out[i] = e;
        }
        // Duplicates within a row would make the access count ambiguous.
        for (size_t i = 0; i < k; ++i)
            for (size_t j = i + 1; j < k; ++j)
                if (out[i] != kTraceNoExpert && out[i] == out[j])
                    fail(Status::bad_format, "%s: token %u layer %u lists expert %u twice", path.c_str(), token, layer,
                         out[i]);
    }
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
