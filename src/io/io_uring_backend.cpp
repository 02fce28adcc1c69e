// io_uring backend: one ring owned by the consumer thread (no completion
// thread), registered files, and the cache arena registered as fixed buffers
// so the kernel does not pin and unpin pages on every read. The kernel's
// io-wq worker threads (the ones that run reads which cannot complete inline)
// are confined to the CPUs near the storage device of the registered files.
#include <liburing.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "common/topology.hpp"
#include "io/read_backend.hpp"

namespace moe::io {

std::string io_uring_unavailable_reason() {
    const char *kill = std::getenv("MOESTREAM_DISABLE_IO_URING");
    if (kill && std::strcmp(kill, "1") == 0) return "io_uring disabled by MOESTREAM_DISABLE_IO_URING=1";
    io_uring ring;
    const int rc = io_uring_queue_init(4, &ring, 0);
    if (rc < 0) return format("io_uring_queue_init failed: %s", std::strerror(-rc));
    std::string why;
    io_uring_probe *probe = io_uring_get_probe_ring(&ring);
    if (!probe) {
        why = "io_uring opcode probe unavailable (kernel too old)";
    } else {
        const struct {
            int op;
            const char *name;
        } needed[] = {{IORING_OP_READ, "READ"}, {IORING_OP_READ_FIXED, "READ_FIXED"},
                      {IORING_OP_ASYNC_CANCEL, "ASYNC_CANCEL"}};
        for (const auto &n : needed)
            if (!io_uring_opcode_supported(probe, n.op)) {
                why = format("io_uring opcode %s not supported by this kernel", n.name);
                break;
            }
        io_uring_free_probe(probe);
    }
    io_uring_queue_exit(&ring);
    return why;
}

namespace {

constexpr uint64_t kCancelMarker = ~0ull;
// user_data of a drain marker (see issue_drain): this bit plus its number.
constexpr uint64_t kDrainBit = 1ull << 63;
constexpr unsigned kFileTableSize = 64;

class IoUringBackend final : public ReadBackend {
public:
    IoUringBackend(uint32_t depth, IoUringFaultHook hook) : depth_(depth), hook_(std::move(hook)), ops_(depth) {
        if (depth == 0) fail(Status::invalid_argument, "io_uring backend: queue depth must be positive");
        // Room for one cancel per read besides the reads themselves.
        io_uring_params params{};
        params.flags = IORING_SETUP_CQSIZE;
        params.cq_entries = 4 * depth;
        const int rc = io_uring_queue_init_params(2 * depth, &ring_, &params);
        if (rc < 0) fail(Status::unsupported, "io_uring_queue_init failed: %s (errno %d)", std::strerror(-rc), -rc);
        files_registered_ = io_uring_register_files_sparse(&ring_, kFileTableSize) == 0;
        free_ops_.reserve(depth);
        orphans_.reserve(depth);
        for (uint32_t i = depth; i > 0; --i) free_ops_.push_back(i - 1);
    }
    ~IoUringBackend() override {
        // Reads still in flight write into memory the caller may free next:
        // wait for them before the ring goes away.
        try {
            while (in_flight_ > 0) {
                ReadCompletion c[16];
                reap(c, true);
            }
        } catch (...) {
            // The ring is broken; nothing more can be waited for.
        }
        io_uring_queue_exit(&ring_);
    }

    // Says when the reads cannot land in registered buffers (RLIMIT_MEMLOCK
    // without CAP_IPC_LOCK, usually): every read still works but pins its
    // pages itself, and the user should know.
    const char *name() const override { return name_.c_str(); }

    uint32_t add_file(int fd) override {
        const uint32_t index = static_cast<uint32_t>(fds_.size());
        bool fixed = false;
        if (files_registered_ && index < kFileTableSize)
            fixed = io_uring_register_files_update(&ring_, index, &fd, 1) == 1;
        fds_.push_back(File{fd, fixed});
        place_workers_near(fd);
        return index;
    }

    void register_memory(std::span<const MemoryRegion> regions) override {
        if (!regions_.empty()) io_uring_unregister_buffers(&ring_);
        regions_.assign(regions.begin(), regions.end());
        std::vector<iovec> iov;
        for (const auto &r : regions) iov.push_back(iovec{r.base, r.size});
        // Fixed buffers count against RLIMIT_MEMLOCK; when the limit is too
        // low the reads go through plain READ (name() says so).
        const int rc = iov.empty() ? 0 : io_uring_register_buffers(&ring_, iov.data(), static_cast<unsigned>(iov.size()));
        buffers_registered_ = !iov.empty() && rc == 0;
        name_ = "io_uring";
        if (rc < 0) name_ += std::string(" (no fixed buffers: ") + (rc == -ENOMEM ? "RLIMIT_MEMLOCK" : std::strerror(-rc)) + ")";
    }

    bool memory_pinned() const override { return buffers_registered_; }
    uint32_t queue_depth() const override { return depth_; }
    uint32_t in_flight() const override { return in_flight_; }

    void submit(const ReadRequest &r) override {
        if (free_ops_.empty()) fail(Status::internal, "io_uring backend: submit with a full queue (%u)", depth_);
        if (r.file >= fds_.size()) fail(Status::internal, "io_uring backend: unknown file index %u", r.file);
        const uint32_t id = free_ops_.back();
        ops_[id] = Op{r, 0, true, 0};
        if (!queue(id)) {
            ops_[id].busy = false;
            fail(Status::internal, "io_uring backend: submission queue full");
        }
        free_ops_.pop_back();
        ++in_flight_;
        // Queued: if the kernel does not take it now, it goes with the next
        // submit or wait, and an error that stays is reported by reap.
        flush();
    }

    void cancel(uint64_t tag) override {
        for (uint32_t id = 0; id < ops_.size(); ++id) {
            if (!ops_[id].busy || ops_[id].request.tag != tag) continue;
            io_uring_sqe *sqe = get_sqe();
            if (!sqe) return;  // best effort: the read completes all the same
            io_uring_prep_cancel64(sqe, id, 0);
            io_uring_sqe_set_data64(sqe, kCancelMarker);
            flush();
        }
    }

    size_t reap(std::span<ReadCompletion> out, bool wait) override {
        size_t n = 0;
        while (n < out.size()) {
            if (drain_wanted_) issue_drain();
            if (!orphans_.empty()) {
                const uint32_t id = orphans_.back();
                orphans_.pop_back();
                if (queue(id)) {
                    // Read again after every marker issued so far (a marker
                    // issued while it waited here marked it too): none of
                    // them can settle whether this read lost its completion.
                    ops_[id].drain = 0;
                    flush();
                } else {
                    out[n++] = finish(id, -EAGAIN);  // no room to ask again: the read fails rather than never completing
                }
                continue;
            }
            io_uring_cqe *cqe = nullptr;
            const char *failed = "io_uring_peek_cqe";
            int rc = call("peek", n, [&] { return io_uring_peek_cqe(&ring_, &cqe); });
            if (rc == -EAGAIN) {
                if (n > 0 || !wait || in_flight_ == 0) break;
                // Submits first what a refused submit left queued: the read
                // waited for may be one of them.
                failed = "io_uring_submit_and_wait";
                rc = call("wait", n, [&] { return io_uring_submit_and_wait(&ring_, 1); });
                if (rc == -EAGAIN) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // short of memory
                if (rc >= 0 || rc == -EINTR || rc == -EAGAIN || rc == -EBUSY) continue;
            } else if (rc == -EINTR) {
                continue;
            }
            if (rc == -EBADR) {
                drain_wanted_ = true;  // see issue_drain
                continue;
            }
            if (rc < 0) {
                // The completions taken are handed over first (thrown away
                // with the exception, their reads would never complete); an
                // error that stays comes back at the next call.
                if (n > 0) break;
                fail(Status::io, "%s failed: %s (errno %d)", failed, std::strerror(-rc), -rc);
            }
            const uint64_t data = io_uring_cqe_get_data64(cqe);
            int res = cqe->res;
            io_uring_cqe_seen(&ring_, cqe);
            if (hook_ && hook_("drop", n) < 0) continue;  // tests: as if the kernel had lost this completion
            if (data == kCancelMarker) continue;
            if (data & kDrainBit) {
                adopt_orphans(data & ~kDrainBit);
                continue;
            }
            const uint32_t id = static_cast<uint32_t>(data);
            // A completion for no read in flight would free a slot twice or
            // report a read whose bytes have not landed: never expected, and
            // ignored rather than trusted.
            if (id >= ops_.size() || !ops_[id].busy) continue;
            Op &op = ops_[id];
            op.drain = 0;  // its read is alive
            const bool partial = res > 0 && op.done + static_cast<uint64_t>(res) < op.request.length;
            if (partial) op.done += static_cast<uint64_t>(res);
            if (partial || res == -EAGAIN || res == -EINTR) {
                // Asks for the rest (a short read) or again.
                if (queue(id)) {
                    flush();
                    continue;
                }
                res = -EAGAIN;  // no room to ask again: the read fails rather than never completing
            }
            // A read cancelled after part of it landed is still a cancelled
            // read: results are short only at the end of the file.
            out[n++] = finish(id, res);
        }
        return n;
    }

private:
    struct File {
        int fd;
        bool fixed;
    };
    struct Op {
        ReadRequest request;
        uint64_t done;
        bool busy;
        uint64_t drain = 0;  // the drain marker that settles whether its completion was dropped (0: none)
    };

    // The read's completion for the caller (res: what its last part returned),
    // and its slot back to the free list.
    ReadCompletion finish(uint32_t id, int res) {
        Op &op = ops_[id];
        const int64_t result = res < 0 ? res : static_cast<int64_t>(op.done + static_cast<uint64_t>(res));
        op.busy = false;
        op.drain = 0;
        free_ops_.push_back(id);
        --in_flight_;
        return ReadCompletion{op.request.tag, result};
    }

    // -EBADR: the kernel could not keep some completions (its overflow list
    // could not grow) and dropped them; their reads are finished but would
    // never be reported. Which ones is unknown, so every read in flight now
    // waits on a drain marker, a no-op the kernel starts only after all
    // requests before it have completed: a read that has not reported by the
    // time the marker's completion arrives lost its completion, and is read
    // again (the rest past what was reported; reads are repeatable). Reads
    // submitted after the marker are not suspects. Without room for the
    // marker now, the next pass of reap tries again.
    void issue_drain() {
        io_uring_sqe *sqe = get_sqe();
        if (!sqe) return;
        drain_wanted_ = false;
        const uint64_t marker = ++drains_;
        for (Op &op : ops_)
            if (op.busy) op.drain = marker;
        io_uring_prep_nop(sqe);
        sqe->flags |= IOSQE_IO_DRAIN;
        io_uring_sqe_set_data64(sqe, kDrainBit | marker);
        flush();
    }

    // The drain marker `marker` completed: the reads still waiting on it
    // lost their completions.
    void adopt_orphans(uint64_t marker) {
        for (uint32_t id = 0; id < ops_.size(); ++id)
            if (ops_[id].busy && ops_[id].drain == marker) {
                ops_[id].drain = 0;
                orphans_.push_back(id);
            }
    }

    // Best effort: kernels before 5.14 lack the io-wq affinity call, and the
    // reads work the same without it.
    void place_workers_near(int fd) {
        const std::vector<int> near = topology::placement_for_fd(fd).cpus;
        std::vector<int> cpus;
        std::set_union(cpus_.begin(), cpus_.end(), near.begin(), near.end(), std::back_inserter(cpus));
        if (cpus == cpus_) return;
        cpus_ = std::move(cpus);
        cpu_set_t mask;
        CPU_ZERO(&mask);
        for (int c : cpus_)
            if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &mask);
        (void)io_uring_register_iowq_aff(&ring_, sizeof mask, &mask);
    }

    // Makes a ring call, or fails it as the test hook says.
    template <typename Call>
    int call(std::string_view name, size_t taken, Call &&real) {
        if (hook_)
            if (const int rc = hook_(name, taken); rc < 0) return rc;
        return real();
    }

    // Null when the submission queue stays full (or the test hook says it is).
    io_uring_sqe *get_sqe() {
        if (hook_ && hook_("sqe", 0) < 0) return nullptr;
        io_uring_sqe *sqe = io_uring_get_sqe(&ring_);
        if (!sqe) {
            flush();
            sqe = io_uring_get_sqe(&ring_);
        }
        return sqe;
    }

    // Queues the read (the rest of it, past op.done); false when there is no
    // room in the submission queue.
    bool queue(uint32_t id) {
        const Op &op = ops_[id];
        const File &f = fds_[op.request.file];
        uint8_t *dest = op.request.dest + op.done;
        const unsigned len = static_cast<unsigned>(op.request.length - op.done);
        const uint64_t off = op.request.offset + op.done;
        const int fd = f.fixed ? static_cast<int>(op.request.file) : f.fd;
        io_uring_sqe *sqe = get_sqe();
        if (!sqe) return false;
        const int buf = buffers_registered_ ? region_of(dest, len) : -1;
        if (buf >= 0)
            io_uring_prep_read_fixed(sqe, fd, dest, len, off, buf);
        else
            io_uring_prep_read(sqe, fd, dest, len, off);
        if (f.fixed) sqe->flags |= IOSQE_FIXED_FILE;
        io_uring_sqe_set_data64(sqe, id);
        return true;
    }

    // Hands the queued entries to the kernel. Those it refuses for now (short
    // of memory, completions to take first) stay queued, and the next submit
    // or wait hands them over again; a refusal that lasts comes back from
    // that wait, where reap reports it. Never throws: a read queued is the
    // caller's to reap.
    void flush() {
        int rc;
        do rc = call("submit", 0, [&] { return io_uring_submit(&ring_); });
        while (rc == -EINTR);
    }

    int region_of(const uint8_t *p, size_t len) const {
        for (size_t i = 0; i < regions_.size(); ++i)
            if (p >= regions_[i].base && p + len <= regions_[i].base + regions_[i].size) return static_cast<int>(i);
        return -1;
    }

    const uint32_t depth_;
    IoUringFaultHook hook_;
    io_uring ring_{};
    bool files_registered_ = false;
    std::string name_ = "io_uring";
    bool buffers_registered_ = false;
    std::vector<File> fds_;
    std::vector<MemoryRegion> regions_;
    std::vector<Op> ops_;
    std::vector<uint32_t> free_ops_;
    std::vector<uint32_t> orphans_;  // reads whose completion the kernel dropped, to be read again
    uint64_t drains_ = 0;            // drain markers issued
    bool drain_wanted_ = false;      // the kernel said it dropped completions; no marker issued yet
    uint32_t in_flight_ = 0;
    std::vector<int> cpus_;  // io-wq worker affinity
};

}  // namespace

std::unique_ptr<ReadBackend> make_io_uring_backend(uint32_t queue_depth, IoUringFaultHook hook) {
    const std::string why = io_uring_unavailable_reason();
    if (!why.empty()) fail(Status::unsupported, "%s", why.c_str());
    return std::make_unique<IoUringBackend>(queue_depth, std::move(hook));
}

std::unique_ptr<ReadBackend> make_read_backend(BackendKind kind, uint32_t queue_depth, std::string *why) {
    if (kind == BackendKind::pread) {
        if (why) *why = "pread thread pool (requested)";
        return make_pread_backend(queue_depth);
    }
    if (kind == BackendKind::io_uring) {
        if (why) *why = "io_uring (requested)";
        return make_io_uring_backend(queue_depth);
    }
    const std::string reason = io_uring_unavailable_reason();
    if (reason.empty()) {
        try {
            auto b = std::make_unique<IoUringBackend>(queue_depth, IoUringFaultHook{});
            if (why) *why = "io_uring (supported by this kernel)";
            return b;
        } catch (const Error &e) {
            if (why) *why = std::string("pread thread pool: ") + e.what();
            return make_pread_backend(queue_depth);
        }
    }
    if (why) *why = "pread thread pool: " + reason;
    return make_pread_backend(queue_depth);
}

}  // namespace moe::io
