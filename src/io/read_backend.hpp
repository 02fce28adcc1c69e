// Asynchronous positional reads: the one interface every expert read goes
// through. A caller registers its files (and optionally the memory its reads
// land in), submits reads tagged with its own ids, and reaps completions in
// the order the reads finish.
//
// Contract shared by every backend:
// - Each submitted read produces exactly one completion, even when cancelled
//   (result -ECANCELED) or failed (result -errno).
// - result >= 0 is the number of bytes read; it is short of `length` only at
//   end of file (backends continue short reads themselves).
// - submit() never blocks and never fails for lack of room when
//   in_flight() < queue_depth(); callers keep their own backlog beyond that.
// - All calls come from one thread (the thread that owns the consumer); a
//   backend's internal threads never call back into the caller.
// - A backend that cannot take completions (io_uring reporting an error)
//   throws moe::Error(io) from reap() only when that call has taken none:
//   those taken go first, and the error comes back at the next call if it
//   stays. Reads stay in flight through it. Completions the kernel dropped
//   (io_uring's -EBADR) are not an error: those reads are found and read
//   again, so they too complete exactly once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace moe::io {

struct ReadRequest {
    uint32_t file = 0;      // index returned by add_file
    uint64_t offset = 0;    // byte position in the file
    uint32_t length = 0;    // bytes to read
    uint8_t *dest = nullptr;
    uint64_t tag = 0;       // caller's id, returned in the completion
};

struct ReadCompletion {
    uint64_t tag = 0;
    int64_t result = 0;     // bytes read, or -errno
};

struct MemoryRegion {
    uint8_t *base = nullptr;
    size_t size = 0;
};

class ReadBackend {
public:
    virtual ~ReadBackend() = default;
    virtual const char *name() const = 0;
    // Registers an open descriptor (the caller keeps ownership and keeps it
    // open while reads may use it). Returns the index for ReadRequest::file.
    virtual uint32_t add_file(int fd) = 0;
    // Declares the memory reads will land in (io_uring registers it as fixed
    // buffers). Optional; reads outside registered memory still work.
    virtual void register_memory(std::span<const MemoryRegion> regions) { (void)regions; }
    // True when register_memory pinned the memory (io_uring fixed buffers),
    // which also faulted every page of it in.
    virtual bool memory_pinned() const { return false; }
    virtual uint32_t queue_depth() const = 0;
    virtual uint32_t in_flight() const = 0;
    // Queues one read; throws moe::Error(internal) when called with a full queue.
    virtual void submit(const ReadRequest &request) = 0;
    // Best effort: a read not yet started completes with -ECANCELED.
    virtual void cancel(uint64_t tag) { (void)tag; }
    // Copies up to out.size() completions in arrival order. With wait=true
    // and reads in flight, blocks until at least one is available.
    virtual size_t reap(std::span<ReadCompletion> out, bool wait) = 0;
};

enum class BackendKind { automatic, io_uring, pread };

// automatic: io_uring when the kernel supports the operations used and
// MOESTREAM_DISABLE_IO_URING is not set to 1, else the pread pool.
// `why` (optional) receives a sentence saying which backend and why.
std::unique_ptr<ReadBackend> make_read_backend(BackendKind kind, uint32_t queue_depth, std::string *why = nullptr);

std::unique_ptr<ReadBackend> make_pread_backend(uint32_t queue_depth, uint32_t n_threads = 0);
// Tests: consulted before each call the io_uring backend makes to its ring
// ("submit"; "wait", which submits what is queued and waits for a completion;
// "peek"), with the completions the current reap has taken so far. A negative
// errno makes that call return it instead of being made; 0 lets it run.
// "sqe" is consulted before each submission entry is taken, inside a reap or
// not (its count is always 0): a negative value finds the submission queue full.
// "drop" is consulted for each completion taken from the ring: a negative
// value throws it away, as a kernel that dropped it would (it then says so
// with -EBADR from a later peek or wait, which the hook scripts too).
using IoUringFaultHook = std::function<int(std::string_view call, size_t taken)>;

// Throws moe::Error(unsupported) when io_uring cannot be used here.
std::unique_ptr<ReadBackend> make_io_uring_backend(uint32_t queue_depth, IoUringFaultHook hook = {});
// Why io_uring cannot be used ("" when it can): kill switch, setup failure,
// or a missing opcode.
std::string io_uring_unavailable_reason();

}  // namespace moe::io
