#include "runtime/dense_copy.hpp"

#include <fcntl.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>

#include "common/error.hpp"
#include "common/monotonic_clock.hpp"
#include "experts/io_mode_choice.hpp"
#include "io/direct_fallback.hpp"
#include "io/read_file.hpp"

namespace moe {
namespace {

constexpr uint32_t kChunk = 4u << 20;  // bytes per read
constexpr uint32_t kQueueDepth = 8;    // reads in flight: enough to keep a device busy at open

struct Chunk {
    size_t run = 0;
    uint64_t offset = 0;  // in the shard file
    uint32_t length = 0;
    uint32_t needed = 0;  // bytes that must arrive (the aligned tail may lie past the end of the file)
    uint8_t *dest = nullptr;
};

}  // namespace

DenseCopy::DenseCopy(const gguf::GgufFile &file, NumaPlacement placement, bool direct, const Filter &filter,
                     std::unique_ptr<io::ReadBackend> backend) {
    const uint64_t t0 = monotonic_ns();
    const std::vector<const gguf::TensorInfo *> copied = dense_tensors(file, filter);
    uint64_t total = 0;
    for (const DenseRun &r : dense_runs(copied)) {
        runs_.push_back(Run{r, nullptr});
        total += io::align_range(r.file_offset, r.length, io::kDirectAlignment).length;
    }
    memory_ = NumaBuffer(size_t(total), placement);
    uint64_t at = 0;
    for (Run &r : runs_) {
        const io::AlignedRange a = io::align_range(r.where.file_offset, r.where.length, io::kDirectAlignment);
        r.copy = static_cast<uint8_t *>(memory_.data()) + at + a.skip;
        at += a.length;
    }
    // Every copied tensor, by its address in the mapping (runs may also hold
    // gaps and tensors the filter left out; those are not the copy's). The
    // tensors come in the runs' order, so each run is found walking forward.
    size_t r = 0;
    for (const gguf::TensorInfo *t : copied) {
        auto holds = [t](const DenseRun &run) {
            return t->shard == run.shard && t->file_offset + t->nbytes <= run.file_offset + run.length;
        };
        while (r < runs_.size() && !holds(runs_[r].where)) ++r;
        if (r == runs_.size()) fail(Status::internal, "dense copy: tensor %s is in no run", t->name.c_str());
        tensors_.push_back(Tensor{t->data, t->nbytes, runs_[r].copy + (t->file_offset - runs_[r].where.file_offset)});
        tensor_bytes_ += t->nbytes;
    }
    std::sort(tensors_.begin(), tensors_.end(),
              [](const Tensor &a, const Tensor &b) { return std::less<const uint8_t *>()(a.mapped, b.mapped); });
    if (!backend) backend = io::make_read_backend(direct ? io::BackendKind::automatic : io::BackendKind::pread, kQueueDepth);
    io::DirectFallbackBackend reads(std::move(backend));
    read_runs(file, reads, direct);
    seconds_ = double(monotonic_ns() - t0) * 1e-9;
}

void DenseCopy::read_runs(const gguf::GgufFile &file, io::DirectFallbackBackend &backend, bool want_direct) {
    std::vector<io::ReadFile> files;
    std::vector<uint32_t> ids;  // by shard: the backend index its reads use
    for (size_t i = 0; i < file.n_shards(); ++i) {
        files.emplace_back(file.shard_path(i), want_direct);
        ids.push_back(backend.add_read_file(files.back()));
    }

    std::vector<Chunk> chunks;
    for (size_t r = 0; r < runs_.size(); ++r) {
        const DenseRun &run = runs_[r].where;
        const io::AlignedRange a = io::align_range(run.file_offset, run.length, io::kDirectAlignment);
        uint8_t *base = runs_[r].copy - a.skip;
        const uint64_t wanted_end = run.file_offset + run.length;
        for (uint64_t off = 0; off < a.length; off += kChunk) {
            Chunk c;
            c.run = r;
            c.offset = a.offset + off;
            c.length = uint32_t(std::min<uint64_t>(kChunk, a.length - off));
            c.needed = uint32_t(std::min<uint64_t>(c.length, wanted_end > c.offset ? wanted_end - c.offset : 0));
            c.dest = base + off;
            chunks.push_back(c);
        }
    }

    // Every read in flight lands in the buffer and reads through `files`, so
    // none may outlive this function: after a failed read, or an exception
    // from the backend itself, the rest are reaped before the error leaves.
    std::string failure;
    size_t next = 0;
    std::array<io::ReadCompletion, kQueueDepth> done{};
    try {
        while (next < chunks.size() || backend.in_flight() > 0) {
            while (failure.empty() && next < chunks.size() && backend.in_flight() < backend.queue_depth()) {
                const Chunk &c = chunks[next];
                backend.submit(io::ReadRequest{ids[runs_[c.run].where.shard], c.offset, c.length, c.dest, next++});
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
                const std::string &path = file.shard_path(runs_[c.run].where.shard);
                failure = done[i].result < 0
                              ? format("reading the dense weights of %s at offset %llu (%u bytes): %s", path.c_str(),
                                       static_cast<unsigned long long>(c.offset), c.length,
                                       std::strerror(int(-done[i].result)))
                              : format("reading the dense weights of %s at offset %llu: %lld of %u bytes arrived",
                                       path.c_str(), static_cast<unsigned long long>(c.offset),
                                       static_cast<long long>(done[i].result), c.needed);
            }
        }
    } catch (...) {
        try {
            while (backend.in_flight() > 0) backend.reap(done, true);
        } catch (...) {
            // The backend is broken; its destructor is the last chance to wait.
        }
        throw;
    }
    if (!failure.empty()) fail(Status::io, "%s", failure.c_str());
    // A shard without O_DIRECT, or whose filesystem refused it for a read, was read buffered.
    direct_ = want_direct && std::all_of(ids.begin(), ids.end(), [&](uint32_t id) { return backend.reads_direct(id); });
#ifdef POSIX_FADV_DONTNEED
    // Buffered reads left the bytes in the page cache as well: drop them
    // (pages that other mappings use stay).
    for (const Run &r : runs_)
        if (!backend.reads_direct(ids[r.where.shard]))
            ::posix_fadvise(files[r.where.shard].buffered_fd(), off_t(r.where.file_offset), off_t(r.where.length),
                            POSIX_FADV_DONTNEED);
#endif
}

const uint8_t *DenseCopy::find(const uint8_t *mapped) const {
    const std::less<const uint8_t *> before;
    auto it = std::upper_bound(tensors_.begin(), tensors_.end(), mapped,
                               [&](const uint8_t *p, const Tensor &t) { return before(p, t.mapped); });
    if (it == tensors_.begin()) return nullptr;
    const Tensor &t = *std::prev(it);
    return before(mapped, t.mapped + t.length) ? t.copy + (mapped - t.mapped) : nullptr;
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
