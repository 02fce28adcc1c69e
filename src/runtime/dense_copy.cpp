#include "runtime/dense_copy.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include "common/error.hpp"
#include "runtime/io_mode_choice.hpp"
#include "common/monotonic_clock.hpp"
#include "io/read_file.hpp"
#include "model/tensor_roles.hpp"

namespace moe {
namespace {

constexpr uint64_t kMergeGap = 64 * 1024;       // read a small gap rather than issue another read
constexpr uint32_t kChunk = 4u << 20;           // bytes per read
constexpr uint32_t kQueueDepth = 8;             // reads in flight: enough to keep a device busy at open

struct Chunk {
    size_t run = 0;
    uint64_t offset = 0;    // in the shard file
    uint32_t length = 0;
    uint32_t needed = 0;    // bytes that must arrive (the aligned tail may lie past the end of the file)
    uint8_t *dest = nullptr;
};

}  // namespace

DenseCopy::DenseCopy(const gguf::GgufFile &file, NumaPlacement placement, bool direct, const Filter &filter,
                     std::unique_ptr<io::ReadBackend> backend) {
    const uint64_t t0 = monotonic_ns();
    plan_runs(file, filter);
    uint64_t total = 0;
    for (const Run &r : runs_) total += io::align_range(r.file_offset, r.length, io::kDirectAlignment).length;
    memory_ = NumaBuffer(size_t(total), placement);
    if (!backend) backend = io::make_read_backend(direct ? io::BackendKind::automatic : io::BackendKind::pread, kQueueDepth);
    read_runs(file, *backend, direct, static_cast<uint8_t *>(memory_.data()));
    seconds_ = double(monotonic_ns() - t0) * 1e-9;
}

void DenseCopy::plan_runs(const gguf::GgufFile &file, const Filter &filter) {
    std::vector<const gguf::TensorInfo *> dense;
    for (const gguf::TensorInfo &t : file.tensors())
        if (!is_expert_tensor(t) && t.data && t.nbytes > 0 && (!filter || filter(t))) dense.push_back(&t);
    std::sort(dense.begin(), dense.end(), [](const gguf::TensorInfo *a, const gguf::TensorInfo *b) {
        return a->shard != b->shard ? a->shard < b->shard : a->file_offset < b->file_offset;
    });
    for (const gguf::TensorInfo *t : dense) {
        tensor_bytes_ += t->nbytes;
        if (!runs_.empty()) {
            Run &last = runs_.back();
            const uint64_t end = last.file_offset + last.length;
            if (t->shard == last.shard && t->file_offset <= end + kMergeGap) {
                last.length = std::max(end, t->file_offset + t->nbytes) - last.file_offset;
                continue;
            }
        }
        runs_.push_back(Run{t->shard, t->file_offset, t->nbytes, t->data, nullptr});
    }
    // Within a shard the mapping is in file order; shards are separate mappings.
    std::sort(runs_.begin(), runs_.end(), [](const Run &a, const Run &b) { return a.mapped < b.mapped; });
}

void DenseCopy::read_runs(const gguf::GgufFile &file, io::ReadBackend &backend, bool want_direct, uint8_t *base) {
    std::vector<io::ReadFile> files;
    std::vector<uint32_t> ids;
    direct_ = want_direct;
    for (size_t i = 0; i < file.n_shards(); ++i) {
        files.emplace_back(file.shard_path(i), want_direct);
        direct_ = direct_ && files.back().direct();
        ids.push_back(backend.add_file(files.back().direct() ? files.back().direct_fd() : files.back().buffered_fd()));
    }

    std::vector<Chunk> chunks;
    uint64_t at = 0;
    for (size_t r = 0; r < runs_.size(); ++r) {
        Run &run = runs_[r];
        const io::AlignedRange a = io::align_range(run.file_offset, run.length, io::kDirectAlignment);
        run.copy = base + at + a.skip;
        const uint64_t wanted_end = run.file_offset + run.length;
        for (uint64_t off = 0; off < a.length; off += kChunk) {
            Chunk c;
            c.run = r;
            c.offset = a.offset + off;
            c.length = uint32_t(std::min<uint64_t>(kChunk, a.length - off));
            c.needed = uint32_t(std::min<uint64_t>(c.length, wanted_end > c.offset ? wanted_end - c.offset : 0));
            c.dest = base + at + off;
            chunks.push_back(c);
        }
        at += a.length;
    }

    // Every read in flight lands in the buffer, so none may outlive this
    // function: on a failure the rest are reaped before the error leaves.
    std::string failure;
    size_t next = 0;
    std::array<io::ReadCompletion, kQueueDepth> done{};
    while (next < chunks.size() || backend.in_flight() > 0) {
        while (failure.empty() && next < chunks.size() && backend.in_flight() < backend.queue_depth()) {
            const Chunk &c = chunks[next];
            backend.submit(io::ReadRequest{ids[runs_[c.run].shard], c.offset, c.length, c.dest, next});
            ++next;
        }
        if (backend.in_flight() == 0) break;
        const size_t n = backend.reap(done, true);
        for (size_t i = 0; i < n; ++i) {
            const Chunk &c = chunks[size_t(done[i].tag)];
            if (done[i].result >= int64_t(c.needed)) {
                bytes_read_ += uint64_t(done[i].result);
                continue;
            }
            if (!failure.empty()) continue;
            const std::string &path = file.shard_path(runs_[c.run].shard);
            failure = done[i].result < 0
                          ? format("reading the dense weights of %s at offset %llu (%u bytes): %s", path.c_str(),
                                   static_cast<unsigned long long>(c.offset), c.length,
                                   std::strerror(int(-done[i].result)))
                          : format("reading the dense weights of %s at offset %llu: %lld of %u bytes arrived",
                                   path.c_str(), static_cast<unsigned long long>(c.offset),
                                   static_cast<long long>(done[i].result), c.needed);
        }
    }
    if (!failure.empty()) fail(Status::io, "%s", failure.c_str());
}

const uint8_t *DenseCopy::find(const uint8_t *mapped) const {
    auto it = std::upper_bound(runs_.begin(), runs_.end(), mapped,
                               [](const uint8_t *p, const Run &r) { return p < r.mapped; });
    if (it == runs_.begin()) return nullptr;
    const Run &r = *std::prev(it);
    return mapped < r.mapped + r.length ? r.copy + (mapped - r.mapped) : nullptr;
}

const uint8_t *DenseCopy::relocate(const uint8_t *mapped) const {
    if (const uint8_t *c = find(mapped)) return c;
    fail(Status::internal, "dense copy: address %p is not in a copied tensor", static_cast<const void *>(mapped));
}

std::string DenseCopy::describe() const {
    return format("dense weights copied in (%s in %.2f s%s; %s)", human_bytes(tensor_bytes_).c_str(), seconds_,
                  direct_ ? ", O_DIRECT" : "", memory_.placement().c_str());
}

}  // namespace moe
