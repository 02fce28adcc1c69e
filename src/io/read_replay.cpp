#include "io/read_replay.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <vector>

#include "common/error.hpp"
#include "io/direct_fallback.hpp"
#include "io/read_file.hpp"

namespace moe::io {

namespace {

struct FreeDeleter {
    void operator()(uint8_t *p) const { std::free(p); }
};

std::unique_ptr<uint8_t, FreeDeleter> aligned_buffer(size_t bytes) {
    void *p = nullptr;
    if (::posix_memalign(&p, kDirectAlignment, std::max<size_t>(bytes, kDirectAlignment)) != 0)
        fail(Status::out_of_memory, "read replay: cannot allocate %zu bytes of buffers", bytes);
    return std::unique_ptr<uint8_t, FreeDeleter>(static_cast<uint8_t *>(p));
}

bool aligned(uint64_t v) { return v % kDirectAlignment == 0; }

}  // namespace

ReplayFigures replay_reads(std::span<const LoggedRead> reads, const ObservedBackend &names, uint32_t depth,
                           BackendKind kind, std::unique_ptr<ReadBackend> backend_override) {
    ReplayFigures f;
    depth = std::max<uint32_t>(depth, 1);
    f.depth = depth;
    if (reads.empty()) return f;

    // One ReadFile per path: the log may name a file through more than one index.
    std::vector<ReadFile> files;
    std::map<std::string, size_t> file_of_path;
    std::vector<size_t> file_of_index(names.n_files(), SIZE_MAX);
    uint64_t max_length = 0;
    for (const LoggedRead &r : reads) {
        if (r.file >= file_of_index.size() || names.file_path(r.file).empty())
            fail(Status::invalid_argument, "read replay: logged read names file %u, which has no path", r.file);
        if (file_of_index[r.file] == SIZE_MAX) {
            const std::string &path = names.file_path(r.file);
            auto [it, fresh] = file_of_path.emplace(path, files.size());
            if (fresh) files.emplace_back(path, true);
            file_of_index[r.file] = it->second;
        }
        max_length = std::max<uint64_t>(max_length, r.length);
    }

    // Declared before the backend so that it outlives it: when a failed read
    // throws, the backend's destructor waits for the reads still in flight,
    // which land in this memory.
    std::unique_ptr<uint8_t, FreeDeleter> memory;
    auto backend = std::make_unique<DirectFallbackBackend>(backend_override ? std::move(backend_override)
                                                                            : make_read_backend(kind, depth));
    f.backend = backend->name();
    std::vector<uint32_t> ids(files.size());  // by file: the backend index its reads use
    for (size_t i = 0; i < files.size(); ++i) ids[i] = backend->add_read_file(files[i]);
    const uint64_t stride = round_up(max_length, kDirectAlignment);
    const uint32_t n_buffers = backend->queue_depth();
    memory = aligned_buffer(size_t(stride * n_buffers));
    if (stride * n_buffers <= (1ull << 30)) {
        const MemoryRegion region{memory.get(), size_t(stride * n_buffers)};
        backend->register_memory(std::span<const MemoryRegion>(&region, 1));
    }
    std::vector<uint32_t> free_buffers(n_buffers);
    for (uint32_t i = 0; i < n_buffers; ++i) free_buffers[i] = n_buffers - 1 - i;
    std::vector<ReadCompletion> done(n_buffers);
    std::vector<size_t> read_of_buffer(n_buffers, 0);

    const uint64_t t0 = ObservedBackend::steady_now_ns();
    size_t next = 0;
    while (next < reads.size() || backend->in_flight() > 0) {
        while (next < reads.size() && backend->in_flight() < backend->queue_depth() && !free_buffers.empty()) {
            const LoggedRead &r = reads[next];
            const uint32_t id = ids[file_of_index[r.file]];
            // O_DIRECT takes only aligned reads: the others go to the buffered descriptor.
            const bool aligned_read = aligned(r.offset) && aligned(r.length);
            if (!aligned_read || !backend->reads_direct(id)) ++f.buffered_reads;
            const uint32_t b = free_buffers.back();
            free_buffers.pop_back();
            read_of_buffer[b] = next;
            backend->submit(ReadRequest{aligned_read ? id : backend->buffered_twin(id), r.offset, r.length,
                                        memory.get() + uint64_t(b) * stride, b});
            ++next;
        }
        const size_t n = backend->reap(done, true);
        for (size_t i = 0; i < n; ++i) {
            const uint32_t b = uint32_t(done[i].tag);
            const LoggedRead &r = reads[read_of_buffer[b]];
            const std::string &path = files[file_of_index[r.file]].path();
            if (done[i].result < 0)
                fail_errno(int(-done[i].result), "read replay: cannot read %u bytes at offset %llu of %s", r.length,
                           (unsigned long long)r.offset, path.c_str());
            f.bytes += uint64_t(done[i].result);
            ++f.reads;
            free_buffers.push_back(b);
        }
    }
    f.elapsed_ns = ObservedBackend::steady_now_ns() - t0;
    f.buffered_reads += backend->retried();  // refused through O_DIRECT, then read buffered
    return f;
}

}  // namespace moe::io
