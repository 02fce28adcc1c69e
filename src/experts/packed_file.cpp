#include "experts/packed_file.hpp"

#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <utility>
#include <vector>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "io/read_file.hpp"

namespace moe {

namespace {

constexpr char kFileMagic[8] = {'M', 'O', 'E', 'P', 'A', 'C', 'K', 0};

struct FileHeader {
    char magic[8];
    uint32_t version;
    uint32_t alignment;
    uint64_t fingerprint;
    uint32_t n_layer;
    uint32_t header_bytes;   // file header + layer table, rounded up to the alignment
    uint64_t file_bytes;
    uint64_t header_checksum;  // XXH3-64 of [0, 48 + n_layer * sizeof(LayerEntry)) with this field zero
};
static_assert(sizeof(FileHeader) == 48);

struct LayerEntry {
    int32_t n_expert;
    uint32_t reserved;
    uint64_t first_extent;
    uint64_t extent_bytes;
    uint64_t offset[3];
    uint64_t bytes[3];
    uint32_t type[3];
    uint32_t reserved2;
    int64_t cols[3];
    int64_t rows[3];
};
static_assert(sizeof(LayerEntry) == 136);

const ExpertMatrixLayout &matrix(const ExpertLayerLayout &l, int i) { return i == 0 ? l.gate : i == 1 ? l.up : l.down; }

uint64_t table_bytes(uint32_t n_layer) { return sizeof(FileHeader) + uint64_t(n_layer) * sizeof(LayerEntry); }

void read_exact(int fd, void *dst, uint64_t len, uint64_t off, const std::string &path) {
    uint64_t got = 0;
    while (got < len) {
        const ssize_t n = ::pread(fd, static_cast<uint8_t *>(dst) + got, len - got, static_cast<off_t>(off + got));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail_errno(errno, "cannot read %s at offset %llu", path.c_str(), (unsigned long long)(off + got));
        if (n == 0)
            fail(Status::bad_format, "%s: truncated (wanted %llu bytes at offset %llu)", path.c_str(),
                 (unsigned long long)len, (unsigned long long)off);
        got += static_cast<uint64_t>(n);
    }
}

struct ParsedHeader {
    uint64_t fingerprint = 0;
    uint64_t header_bytes = 0;
    std::vector<PackedLayer> layers;
    std::vector<LayerEntry> entries;
};

// Reads are at most 4 GiB (ReadRequest::length), so an extent must fit one.
constexpr uint64_t kMaxExtentBytes = (uint64_t(UINT32_MAX) / kPackedAlignment) * kPackedAlignment;

// Why a layer entry cannot describe extents inside this file ("" when it
// can): extents aligned, inside the file after the header, and the three
// matrices in order inside each extent after the expert header. Written
// with subtractions so that no hostile value can wrap a sum.
std::string layer_entry_problem(const LayerEntry &e, uint64_t header_bytes, uint64_t file_size) {
    if (e.n_expert < 0) return "a negative expert count";
    if (e.n_expert == 0) return "";
    if (e.extent_bytes == 0 || e.extent_bytes % kPackedAlignment != 0 || e.extent_bytes > kMaxExtentBytes)
        return format("an extent size of %llu bytes", (unsigned long long)e.extent_bytes);
    uint64_t span = 0;
    if (e.first_extent % kPackedAlignment != 0 || e.first_extent < header_bytes || e.first_extent > file_size ||
        __builtin_mul_overflow(uint64_t(e.n_expert), e.extent_bytes, &span) || span > file_size - e.first_extent)
        return "extents outside the file";
    uint64_t end = kExpertHeaderBytes;  // each matrix starts at or after the previous one's end
    for (int i = 0; i < 3; ++i) {
        if (e.offset[i] < end || e.offset[i] > e.extent_bytes || e.bytes[i] > e.extent_bytes - e.offset[i])
            return format("matrix %d at %llu (+%llu bytes) not inside its %llu-byte extent after the expert "
                          "header and the matrix before it",
                          i, (unsigned long long)e.offset[i], (unsigned long long)e.bytes[i],
                          (unsigned long long)e.extent_bytes);
        end = e.offset[i] + e.bytes[i];
    }
    return "";
}

ParsedHeader parse_header(int fd, const std::string &path, uint64_t file_size) {
    FileHeader h{};
    if (file_size < sizeof h) fail(Status::bad_format, "%s: too small to be a packed expert file", path.c_str());
    read_exact(fd, &h, sizeof h, 0, path);
    if (std::memcmp(h.magic, kFileMagic, sizeof kFileMagic) != 0)
        fail(Status::bad_format, "%s: not a packed expert file (bad magic)", path.c_str());
    if (h.version != kPackedVersion)
        fail(Status::bad_format, "%s: packed format version %u, this build reads %u", path.c_str(), h.version,
             kPackedVersion);
    if (h.alignment != kPackedAlignment || h.n_layer == 0 || h.n_layer > MOESTREAM_MAX_LAYERS ||
        h.header_bytes < table_bytes(h.n_layer) || h.file_bytes != file_size)
        fail(Status::bad_format, "%s: inconsistent header (alignment %u, %u layers, file %llu of %llu bytes)",
             path.c_str(), h.alignment, h.n_layer, (unsigned long long)file_size, (unsigned long long)h.file_bytes);
    std::vector<uint8_t> table(table_bytes(h.n_layer));
    read_exact(fd, table.data(), table.size(), 0, path);
    const uint64_t stored = h.header_checksum;
    std::memset(table.data() + offsetof(FileHeader, header_checksum), 0, sizeof(uint64_t));
    if (XXH3_64bits(table.data(), table.size()) != stored)
        fail(Status::bad_format, "%s: header checksum mismatch (file damaged)", path.c_str());
    ParsedHeader out;
    out.fingerprint = h.fingerprint;
    out.header_bytes = h.header_bytes;
    out.entries.resize(h.n_layer);
    std::memcpy(out.entries.data(), table.data() + sizeof h, h.n_layer * sizeof(LayerEntry));
    for (uint32_t l = 0; l < h.n_layer; ++l) {
        const LayerEntry &e = out.entries[l];
        if (const std::string problem = layer_entry_problem(e, h.header_bytes, file_size); !problem.empty())
            fail(Status::bad_format, "%s: layer %u has %s", path.c_str(), l, problem.c_str());
        PackedLayer p;
        p.n_expert = e.n_expert;
        p.first_extent = e.first_extent;
        p.extent_bytes = e.extent_bytes;
        p.gate_offset = e.offset[0], p.gate_bytes = e.bytes[0];
        p.up_offset = e.offset[1], p.up_bytes = e.bytes[1];
        p.down_offset = e.offset[2], p.down_bytes = e.bytes[2];
        out.layers.push_back(p);
    }
    return out;
}

// The layer table the writer produces for these layouts: per expert one
// extent [header | gate | up | down], matrices 64-byte aligned, extents
// 4 KiB aligned, layers one after the other after the header.
struct PackedPlan {
    std::vector<LayerEntry> entries;
    uint64_t header_bytes = 0;
    uint64_t file_bytes = 0;
};

PackedPlan plan_packed_layout(const std::vector<ExpertLayerLayout> &layouts) {
    const uint32_t n_layer = static_cast<uint32_t>(layouts.size());
    PackedPlan plan;
    plan.entries.resize(n_layer);
    plan.header_bytes = io::round_up(table_bytes(n_layer), kPackedAlignment);
    uint64_t pos = plan.header_bytes;
    for (uint32_t l = 0; l < n_layer; ++l) {
        const ExpertLayerLayout &L = layouts[l];
        LayerEntry &e = plan.entries[l];
        std::memset(&e, 0, sizeof e);
        e.n_expert = L.n_expert;
        if (L.n_expert <= 0) continue;
        uint64_t off = kExpertHeaderBytes;
        for (int i = 0; i < 3; ++i) {
            const ExpertMatrixLayout &m = matrix(L, i);
            e.offset[i] = off;
            e.bytes[i] = m.expert_bytes();
            e.type[i] = static_cast<uint32_t>(m.type);
            e.cols[i] = m.cols;
            e.rows[i] = m.rows;
            off += io::round_up(m.expert_bytes(), 64);
        }
        e.first_extent = pos;
        e.extent_bytes = io::round_up(off, kPackedAlignment);
        if (e.extent_bytes > kMaxExtentBytes)
            fail(Status::unsupported, "layer %u: an expert of %llu bytes is larger than one read (4 GiB) can carry", l,
                 (unsigned long long)e.extent_bytes);
        pos += uint64_t(L.n_expert) * e.extent_bytes;
    }
    plan.file_bytes = pos;
    return plan;
}

// Why an extent's own header does not match its place in the file, or its
// payload fails the checksum ("" when it is intact).
std::string extent_problem(const uint8_t *extent, const PackedLayer &l, uint32_t layer, int32_t expert,
                           const std::string &path) {
    PackedExpertHeader h;
    std::memcpy(&h, extent, sizeof h);
    const uint64_t payload_bytes = l.down_offset + l.down_bytes - l.gate_offset;
    if (h.magic != kExpertMagic || h.layer != layer || h.expert != uint32_t(expert) || h.payload_offset != l.gate_offset ||
        h.payload_bytes != payload_bytes)
        return format("%s: expert %d of layer %u has a damaged header", path.c_str(), expert, layer);
    if (XXH3_64bits(extent + h.payload_offset, h.payload_bytes) != h.checksum)
        return format("%s: expert %d of layer %u fails its checksum", path.c_str(), expert, layer);
    return std::string();
}

// Copies expert `x`'s matrix `m` from the model: from its mapping, or read
// from its shard.
void read_model_matrix(const ExpertMatrixLayout &m, int32_t x, const std::vector<std::unique_ptr<io::ReadFile>> &shards,
                       uint8_t *dst, uint32_t layer) {
    const uint64_t n = m.expert_bytes();
    if (n == 0) return;
    if (m.mapped) {
        std::memcpy(dst, m.mapped + uint64_t(x) * m.expert_stride, n);
        return;
    }
    if (m.shard >= shards.size())
        fail(Status::invalid_argument, "layer %u refers to shard %u of %zu", layer, m.shard, shards.size());
    read_exact(shards[m.shard]->buffered_fd(), dst, n, m.file_offset + uint64_t(x) * m.expert_stride,
               shards[m.shard]->path());
}

std::vector<std::unique_ptr<io::ReadFile>> open_shards(const std::vector<std::string> &shard_paths) {
    std::vector<std::unique_ptr<io::ReadFile>> shards;
    for (const auto &p : shard_paths) shards.push_back(std::make_unique<io::ReadFile>(p, false));
    return shards;
}

// Whether the matrices of an extent (in memory, laid out as `l`) equal the
// model's bytes for expert `x`; `scratch` holds at least one matrix.
bool extent_matches_model(const uint8_t *extent, const PackedLayer &l, const ExpertLayerLayout &L, int32_t x,
                          const std::vector<std::unique_ptr<io::ReadFile>> &shards, std::vector<uint8_t> &scratch,
                          uint32_t layer) {
    const uint64_t offset[3] = {l.gate_offset, l.up_offset, l.down_offset};
    for (int i = 0; i < 3; ++i) {
        const ExpertMatrixLayout &m = matrix(L, i);
        if (scratch.size() < m.expert_bytes()) scratch.resize(m.expert_bytes());
        read_model_matrix(m, x, shards, scratch.data(), layer);
        if (std::memcmp(extent + offset[i], scratch.data(), m.expert_bytes()) != 0) return false;
    }
    return true;
}

std::string differs_from_model(const std::string &path, uint32_t layer, int32_t expert) {
    return format("%s: expert %d of layer %u differs from the model's (packed from other weights of the same shapes)",
                  path.c_str(), expert, layer);
}

}  // namespace

uint64_t model_fingerprint(const uint8_t *header_bytes, uint64_t header_size) {
    return XXH3_64bits(header_bytes, header_size);
}

std::string default_packed_path(const std::string &model_path) { return model_path + ".moepack"; }

uint64_t PackedFile::max_extent_bytes() const {
    uint64_t m = 0;
    for (const auto &l : layers_)
        if (l.n_expert > 0 && l.extent_bytes > m) m = l.extent_bytes;
    return m;
}

PackedFile PackedFile::open(const std::string &path, uint64_t fingerprint, const std::vector<ExpertLayerLayout> &layouts) {
    io::ReadFile file(path, false);
    ParsedHeader h = parse_header(file.buffered_fd(), path, file.size());
    if (h.fingerprint != fingerprint)
        fail(Status::bad_format, "%s was packed from another model (fingerprint %016llx, model %016llx)", path.c_str(),
             (unsigned long long)h.fingerprint, (unsigned long long)fingerprint);
    if (h.layers.size() != layouts.size())
        fail(Status::bad_format, "%s has %zu layers, the model %zu", path.c_str(), h.layers.size(), layouts.size());
    // The file must lay out the model's experts exactly as the writer does:
    // then every offset the reads and views use is one this build computed.
    const PackedPlan plan = plan_packed_layout(layouts);
    for (size_t l = 0; l < layouts.size(); ++l) {
        const LayerEntry &e = h.entries[l], &want = plan.entries[l];
        if (e.n_expert != want.n_expert)
            fail(Status::bad_format, "%s: layer %zu has %d experts, the model %d", path.c_str(), l, e.n_expert,
                 want.n_expert);
        if (e.n_expert == 0) continue;
        for (int i = 0; i < 3; ++i)
            if (e.type[i] != want.type[i] || e.cols[i] != want.cols[i] || e.rows[i] != want.rows[i] ||
                e.bytes[i] != want.bytes[i])
                fail(Status::bad_format, "%s: layer %zu matrix %d differs from the model's", path.c_str(), l, i);
        if (e.first_extent != want.first_extent || e.extent_bytes != want.extent_bytes ||
            !std::equal(std::begin(e.offset), std::end(e.offset), std::begin(want.offset)))
            fail(Status::bad_format, "%s: layer %zu's extents are not laid out as this build writes them", path.c_str(), l);
    }
    if (h.header_bytes != plan.header_bytes || file.size() != plan.file_bytes)
        fail(Status::bad_format, "%s: %llu bytes, the model's experts pack into %llu", path.c_str(),
             (unsigned long long)file.size(), (unsigned long long)plan.file_bytes);
    PackedFile p;
    p.path_ = path;
    p.fingerprint_ = h.fingerprint;
    p.layers_ = std::move(h.layers);
    return p;
}

std::string PackedFile::check_extent(const uint8_t *extent, int32_t layer, int32_t expert) const {
    return extent_problem(extent, layers_[static_cast<size_t>(layer)], uint32_t(layer), expert, path_);
}

void write_packed_file(const std::string &out_path, uint64_t fingerprint, const std::vector<ExpertLayerLayout> &layouts,
                       const std::vector<std::string> &shard_paths) {
    const uint32_t n_layer = static_cast<uint32_t>(layouts.size());
    if (n_layer == 0 || n_layer > MOESTREAM_MAX_LAYERS)
        fail(Status::invalid_argument, "cannot pack %u layers", n_layer);
    const PackedPlan plan = plan_packed_layout(layouts);
    const std::vector<LayerEntry> &entries = plan.entries;
    const uint32_t header_bytes = static_cast<uint32_t>(plan.header_bytes);
    const uint64_t file_bytes = plan.file_bytes;
    uint64_t max_extent = 0;
    for (const LayerEntry &e : entries)
        if (e.n_expert > 0) max_extent = std::max(max_extent, e.extent_bytes);

    const std::vector<std::unique_ptr<io::ReadFile>> shards = open_shards(shard_paths);
    refuse_to_replace(out_path, shard_paths, "packed file");
    AtomicFile out(out_path);
    std::vector<uint8_t> extent(max_extent);
    for (uint32_t l = 0; l < n_layer; ++l) {
        const ExpertLayerLayout &L = layouts[l];
        const LayerEntry &e = entries[l];
        for (int32_t x = 0; x < L.n_expert; ++x) {
            std::memset(extent.data(), 0, e.extent_bytes);
            for (int i = 0; i < 3; ++i) read_model_matrix(matrix(L, i), x, shards, extent.data() + e.offset[i], l);
            PackedExpertHeader h{};
            h.magic = kExpertMagic;
            h.version = kPackedVersion;
            h.n_matrices = 3;
            h.layer = l;
            h.expert = static_cast<uint32_t>(x);
            h.payload_offset = e.offset[0];
            h.payload_bytes = e.offset[2] + e.bytes[2] - e.offset[0];
            h.checksum = XXH3_64bits(extent.data() + h.payload_offset, h.payload_bytes);
            for (int i = 0; i < 3; ++i)
                h.matrix[i] = PackedMatrix{e.type[i], 0, e.cols[i], e.rows[i], e.offset[i], e.bytes[i]};
            std::memcpy(extent.data(), &h, sizeof h);
            out.write_at(extent.data(), e.extent_bytes, e.first_extent + uint64_t(x) * e.extent_bytes);
        }
    }
    std::vector<uint8_t> table(header_bytes, 0);
    FileHeader fh{};
    std::memcpy(fh.magic, kFileMagic, sizeof kFileMagic);
    fh.version = kPackedVersion;
    fh.alignment = kPackedAlignment;
    fh.fingerprint = fingerprint;
    fh.n_layer = n_layer;
    fh.header_bytes = header_bytes;
    fh.file_bytes = file_bytes;
    std::memcpy(table.data(), &fh, sizeof fh);
    std::memcpy(table.data() + sizeof fh, entries.data(), entries.size() * sizeof(LayerEntry));
    const uint64_t sum = XXH3_64bits(table.data(), table_bytes(n_layer));
    std::memcpy(table.data() + offsetof(FileHeader, header_checksum), &sum, sizeof sum);
    out.write_at(table.data(), table.size(), 0);
    if (::ftruncate(out.fd(), static_cast<off_t>(file_bytes)) != 0)
        fail_errno(errno, "cannot size %s", out_path.c_str());
    out.commit();
}

PackedVerifyReport verify_packed_file(const std::string &path, const ModelExperts *model) {
    io::ReadFile file(path, false);
    std::vector<std::unique_ptr<io::ReadFile>> shards;
    if (model) shards = open_shards(model->shard_paths);
    std::vector<uint8_t> scratch;
    ParsedHeader h = parse_header(file.buffered_fd(), path, file.size());
    PackedVerifyReport report;
    uint64_t max_extent = 0;
    for (const auto &l : h.layers) max_extent = std::max(max_extent, l.n_expert > 0 ? l.extent_bytes : 0);
    std::vector<uint8_t> buf(max_extent);
    if (model && model->layouts.size() != h.layers.size())
        fail(Status::invalid_argument, "%s has %zu layers, the model %zu", path.c_str(), h.layers.size(),
             model->layouts.size());
    for (size_t l = 0; l < h.layers.size(); ++l) {
        const PackedLayer &L = h.layers[l];
        for (int32_t x = 0; x < L.n_expert; ++x) {
            read_exact(file.buffered_fd(), buf.data(), L.extent_bytes, L.extent_of(x), path);
            ++report.experts_checked;
            std::string problem = extent_problem(buf.data(), L, uint32_t(l), x, path);
            if (problem.empty() && model &&
                !extent_matches_model(buf.data(), L, model->layouts[l], x, shards, scratch, uint32_t(l)))
                problem = differs_from_model(path, uint32_t(l), x);
            if (!problem.empty()) {
                ++report.bad_experts;
                if (report.first_problem.empty()) report.first_problem = problem;
            }
        }
    }
    return report;
}

std::string packed_sample_mismatch(const PackedFile &packed, const ModelExperts &model) {
    const std::vector<PackedLayer> &layers = packed.layers();
    std::vector<std::pair<uint32_t, int32_t>> samples;  // (layer, expert)
    for (uint32_t l = 0; l < layers.size() && samples.empty(); ++l)
        if (layers[l].n_expert > 0) samples.emplace_back(l, 0);
    for (uint32_t l = uint32_t(layers.size()); l-- > 0;)
        if (layers[l].n_expert > 0) {
            if (samples.empty() || samples[0] != std::make_pair(l, layers[l].n_expert - 1))
                samples.emplace_back(l, layers[l].n_expert - 1);
            break;
        }
    if (samples.empty()) return std::string();
    io::ReadFile file(packed.path(), false);
    const std::vector<std::unique_ptr<io::ReadFile>> shards = open_shards(model.shard_paths);
    std::vector<uint8_t> extent, scratch;
    for (const auto &[l, x] : samples) {
        const PackedLayer &L = layers[l];
        extent.resize(L.extent_bytes);
        read_exact(file.buffered_fd(), extent.data(), L.extent_bytes, L.extent_of(x), packed.path());
        if (!extent_matches_model(extent.data(), L, model.layouts[l], x, shards, scratch, l))
            return differs_from_model(packed.path(), l, x);
    }
    return std::string();
}

}  // namespace moe
