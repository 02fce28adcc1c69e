#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string_view>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "common/mapped_file.hpp"
#include "experts/slot_arena.hpp"
#include "io/fault_injection.hpp"
#include "io/read_backend.hpp"
#include "io/read_file.hpp"
#include "support/child_process.hpp"
#include "support/paths.hpp"
#include "support/status_of.hpp"
#include "support/thread_limit.hpp"

namespace {

using namespace moe::io;

std::vector<uint8_t> write_random_file(const std::string &path, size_t size, uint32_t seed) {
    std::vector<uint8_t> bytes(size);
    std::mt19937 rng(seed);
    for (auto &b : bytes) b = static_cast<uint8_t>(rng());
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
    return bytes;
}

// A file of random bytes in a scratch directory of its own, removed with it.
struct RandomFile {
    RandomFile(size_t size, uint32_t seed)
        : dir(moe::test::scratch_dir()), path(dir + "/data.bin"), bytes(write_random_file(path, size, seed)) {}
    ~RandomFile() { std::filesystem::remove_all(dir); }
    const std::string dir, path;
    const std::vector<uint8_t> bytes;
};

std::unique_ptr<ReadBackend> make(const std::string &kind, uint32_t depth) {
    if (kind == "io_uring") return make_io_uring_backend(depth);
    return make_pread_backend(depth);
}

struct Case {
    std::string backend;
    bool direct;
};

class BackendBytes : public ::testing::TestWithParam<Case> {};

// Random unaligned extents, widened to 4 KiB when direct, read through the
// backend with a deep queue: the bytes must equal the file's exactly.
TEST_P(BackendBytes, RandomExtentsReturnExactBytes) {
    const Case c = GetParam();
    if (c.backend == "io_uring" && !io_uring_unavailable_reason().empty())
        GTEST_SKIP() << io_uring_unavailable_reason();
    const std::string dir = moe::test::scratch_dir();
    const std::string path = dir + "/data.bin";
    const size_t file_size = 3 * 1024 * 1024 + 1234;  // not a multiple of the alignment
    const auto bytes = write_random_file(path, file_size, 7);
    ReadFile file(path, c.direct);
    if (c.direct && !file.direct()) GTEST_SKIP() << file.direct_refused();
    const uint64_t align = file.direct() ? kDirectAlignment : 1;

    const uint32_t depth = 16, n_reads = 200;
    const uint64_t max_len = 300000;
    const uint64_t slot = aligned_length_bound(max_len, kDirectAlignment);
    moe::SlotArena arena(slot * depth);
    auto backend = make(c.backend, depth);
    MemoryRegion region{arena.data(), arena.size()};
    backend->register_memory({&region, 1});
    const uint32_t fidx = backend->add_file(file.direct() ? file.direct_fd() : file.buffered_fd());

    std::mt19937_64 rng(99);
    struct Want {
        uint64_t offset, length, skip;
    };
    std::map<uint64_t, Want> wanted;  // by slot
    std::vector<uint32_t> free_slots;
    for (uint32_t i = 0; i < depth; ++i) free_slots.push_back(i);
    uint32_t issued = 0, checked = 0;
    while (checked < n_reads) {
        while (issued < n_reads && !free_slots.empty()) {
            const uint32_t s = free_slots.back();
            free_slots.pop_back();
            uint64_t len = 1 + rng() % max_len;
            uint64_t off = rng() % file_size;
            if (issued % 17 == 0) off = file_size - std::min<uint64_t>(len, file_size);  // end of file
            len = std::min<uint64_t>(len, file_size - off);
            const AlignedRange r = align_range(off, len, align);
            wanted[s] = Want{off, len, r.skip};
            backend->submit(ReadRequest{fidx, r.offset, static_cast<uint32_t>(r.length), arena.data() + s * slot, s});
            ++issued;
        }
        ReadCompletion done[8];
        const size_t n = backend->reap(done, true);
        ASSERT_GT(n, 0u);
        for (size_t i = 0; i < n; ++i) {
            const Want w = wanted.at(done[i].tag);
            ASSERT_GE(done[i].result, int64_t(w.skip + w.length)) << "short read at " << w.offset;
            ASSERT_EQ(0, std::memcmp(arena.data() + done[i].tag * slot + w.skip, bytes.data() + w.offset, w.length))
                << "bytes differ at offset " << w.offset << " length " << w.length;
            free_slots.push_back(static_cast<uint32_t>(done[i].tag));
            ++checked;
        }
    }
    EXPECT_EQ(backend->in_flight(), 0u);
    std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(All, BackendBytes,
                         ::testing::Values(Case{"pread", false}, Case{"pread", true}, Case{"io_uring", false},
                                           Case{"io_uring", true}),
                         [](const auto &info) {
                             return info.param.backend + (info.param.direct ? "_direct" : "_buffered");
                         });

TEST(ReadBackendFactory, KillSwitchSelectsPread) {
    ::setenv("MOESTREAM_DISABLE_IO_URING", "1", 1);
    std::string why;
    auto b = make_read_backend(BackendKind::automatic, 4, &why);
    ::unsetenv("MOESTREAM_DISABLE_IO_URING");
    EXPECT_STREQ(b->name(), "pread");
    EXPECT_NE(why.find("MOESTREAM_DISABLE_IO_URING"), std::string::npos);
    EXPECT_THROW(
        {
            ::setenv("MOESTREAM_DISABLE_IO_URING", "1", 1);
            try {
                make_io_uring_backend(4);
            } catch (...) {
                ::unsetenv("MOESTREAM_DISABLE_IO_URING");
                throw;
            }
        },
        moe::Error);
}

// Files read through a descriptor of their own (the model's mapping, expert
// reads, buffered or direct) refuse a named pipe at once instead of waiting
// for a writer (checked in a child with an alarm, so a hang fails), and keep
// their descriptors in blocking mode: io_uring would fail a read of a
// non-blocking one with EAGAIN rather than wait for the device.
TEST(ReadFile, APipeIsRefusedAtOnceAndDescriptorsBlock) {
    const std::string dir = moe::test::scratch_dir();
    const std::string pipe = dir + "/pipe.bin", path = dir + "/data.bin";
    ASSERT_EQ(::mkfifo(pipe.c_str(), 0600), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        alarm(5);
        int refused = 0;
        for (int what = 0; what < 3; ++what) {
            try {
                if (what == 0) moe::MappedFile map(pipe);
                else ReadFile file(pipe, what == 2);
            } catch (const moe::Error &e) {
                if (e.status() == moe::Status::io && std::string(e.what()).find("not a regular file") != std::string::npos)
                    ++refused;
            }
        }
        _exit(refused == 3 ? 0 : 1);
    }
    EXPECT_EQ(moe::test::wait_exit_code(pid), 0);
    write_random_file(path, 8192, 5);
    auto blocking = [](int fd) { return fd >= 0 && (::fcntl(fd, F_GETFL) & O_NONBLOCK) == 0; };
    const moe::MappedFile map(path);
    EXPECT_EQ(map.size(), 8192u);
    EXPECT_TRUE(blocking(map.fd()));
    const ReadFile file(path, true);
    EXPECT_EQ(file.size(), 8192u);
    EXPECT_TRUE(blocking(file.buffered_fd()));
    if (file.direct()) EXPECT_TRUE(blocking(file.direct_fd()));
    std::filesystem::remove_all(dir);
}

TEST(AlignRange, WidensToWholeBlocks) {
    const AlignedRange r = align_range(5000, 100, 4096);
    EXPECT_EQ(r.offset, 4096u);
    EXPECT_EQ(r.length, 4096u);
    EXPECT_EQ(r.skip, 904u);
    const AlignedRange s = align_range(4000, 200, 4096);
    EXPECT_EQ(s.offset, 0u);
    EXPECT_EQ(s.length, 8192u);
    EXPECT_LE(s.length, aligned_length_bound(200, 4096));
    const AlignedRange t = align_range(4000, 200, 1);
    EXPECT_EQ(t.offset, 4000u);
    EXPECT_EQ(t.length, 200u);
}

TEST(FaultInjection, ErrorsShortReadsAndCorruption) {
    const RandomFile data(65536, 3);
    ReadFile file(data.path, false);
    FaultInjectingBackend b(make_pread_backend(4), [](const ReadRequest &, uint64_t seq) {
        Fault f;
        if (seq == 0) f.kind = Fault::Kind::error, f.error = EIO;
        if (seq == 1) f.kind = Fault::Kind::short_read, f.short_by = 10;
        if (seq == 2) f.kind = Fault::Kind::corrupt, f.corrupt_at = 3;
        return f;
    });
    const uint32_t fi = b.add_file(file.buffered_fd());
    std::vector<uint8_t> buf(4 * 1000);
    for (uint32_t i = 0; i < 4; ++i) b.submit(ReadRequest{fi, i * 1000ull, 1000, buf.data() + i * 1000, i});
    std::map<uint64_t, int64_t> results;
    while (results.size() < 4) {
        ReadCompletion c[4];
        const size_t n = b.reap(c, true);
        for (size_t i = 0; i < n; ++i) results[c[i].tag] = c[i].result;
    }
    EXPECT_EQ(results[0], -EIO);
    EXPECT_EQ(results[1], 990);
    EXPECT_EQ(results[2], 1000);
    EXPECT_NE(buf[2000 + 3], data.bytes[2000 + 3]);
    EXPECT_EQ(results[3], 1000);
    EXPECT_EQ(0, std::memcmp(buf.data() + 3000, data.bytes.data() + 3000, 1000));
    EXPECT_EQ(b.faults_injected(), 3u);
}

// A delayed read stays in flight, its bytes read, until its time has come
// (a waiting reap sleeps until then) or the gate is released: a consumer
// that waits for nothing else blocks on the gate, where a test can see it.
TEST(FaultInjection, DelayedReadsStayInFlightUntilDueOrReleased) {
    const RandomFile data(8192, 4);
    ReadFile file(data.path, false);
    FaultInjectingBackend b(make_pread_backend(4), [](const ReadRequest &, uint64_t seq) {
        Fault f;
        f.kind = Fault::Kind::delay;
        f.delay_ms = seq == 0 ? 200 : 600000;
        return f;
    });
    const uint32_t fi = b.add_file(file.buffered_fd());
    std::vector<uint8_t> buf(2 * 1000);
    const auto t0 = std::chrono::steady_clock::now();
    for (uint32_t i = 0; i < 2; ++i) b.submit(ReadRequest{fi, i * 1000ull, 1000, buf.data() + i * 1000, i});
    ReadCompletion c[2];
    ASSERT_EQ(b.reap(c, true), 1u);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(200));
    EXPECT_EQ(c[0].tag, 0u);
    EXPECT_EQ(c[0].result, 1000);
    EXPECT_EQ(b.in_flight(), 1u);
    EXPECT_EQ(b.reap(c, false), 0u);
    const std::shared_ptr<DelayGate> gate = b.delay_gate();
    bool waited = false;
    std::thread releaser([&] {
        waited = gate->await_waiter(std::chrono::seconds(60));
        gate->release();
    });
    const size_t n = b.reap(c, true);
    releaser.join();
    EXPECT_TRUE(waited);
    ASSERT_EQ(n, 1u);
    EXPECT_EQ(c[0].tag, 1u);
    EXPECT_EQ(c[0].result, 1000);
    EXPECT_EQ(0, std::memcmp(buf.data(), data.bytes.data(), buf.size()));
    EXPECT_EQ(b.in_flight(), 0u);
    EXPECT_EQ(b.faults_injected(), 2u);
}

TEST(PreadBackend, CancelOfQueuedReadCompletesWithEcanceled) {
    const RandomFile data(8192, 1);
    ReadFile file(data.path, false);
    auto b = make_pread_backend(8, 1);
    const uint32_t fi = b->add_file(file.buffered_fd());
    std::vector<uint8_t> buf(8 * 512);
    for (uint32_t i = 0; i < 8; ++i) b->submit(ReadRequest{fi, i * 512ull, 512, buf.data() + i * 512, i});
    b->cancel(7);
    int completions = 0;
    while (completions < 8) {
        ReadCompletion c[8];
        const size_t n = b->reap(c, true);
        for (size_t i = 0; i < n; ++i) {
            // Either it was still queued (cancelled) or it had started (read).
            EXPECT_TRUE(c[i].result == 512 || (c[i].tag == 7 && c[i].result == -ECANCELED));
            ++completions;
        }
    }
}

}  // namespace

// Every page of the expert cache is in memory once populated: no read has to
// fault (and zero) its destination in the middle of a token.
TEST(SlotArena, PopulateFaultsEveryPageIn) {
    const size_t bytes = size_t{6} << 20;
    moe::SlotArena arena(bytes);
    arena.populate();
    const long page = ::sysconf(_SC_PAGESIZE);
    std::vector<unsigned char> resident(bytes / size_t(page));
    ASSERT_EQ(::mincore(arena.data(), bytes, resident.data()), 0) << std::strerror(errno);
    size_t missing = 0;
    for (unsigned char r : resident) missing += (r & 1) ? 0 : 1;
    EXPECT_EQ(missing, 0u) << "of " << resident.size() << " pages";
}

// Memory io_uring cannot pin (read-only: reads could never land in it) is not
// registered, and the backend says so in its name; the pread pool never pins.
TEST(IoUringBackend, UnpinnableMemoryIsReportedNotRegistered) {
    if (!io_uring_unavailable_reason().empty()) GTEST_SKIP() << io_uring_unavailable_reason();
    const size_t bytes = size_t{1} << 20;
    void *p = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    auto backend = make_io_uring_backend(4);
    MemoryRegion region{static_cast<uint8_t *>(p), bytes};
    backend->register_memory({&region, 1});
    EXPECT_FALSE(backend->memory_pinned());
    EXPECT_NE(std::string(backend->name()).find("no fixed buffers"), std::string::npos) << backend->name();
    backend.reset();
    ::munmap(p, bytes);

    moe::SlotArena arena(bytes);
    auto pool = make_pread_backend(4);
    MemoryRegion writable{arena.data(), arena.size()};
    pool->register_memory({&writable, 1});
    EXPECT_FALSE(pool->memory_pinned());
}

// Reads of `path` through an io_uring backend that fails the ring calls its
// hook says, each read 1000 bytes at 1000 * its tag.
struct FailingRing {
    explicit FailingRing(const std::string &path, IoUringFaultHook hook)
        : file(path, false), backend(make_io_uring_backend(8, std::move(hook))), buf(8 * 1000) {
        fi = backend->add_file(file.buffered_fd());
    }
    void submit(uint32_t tag) { backend->submit(ReadRequest{fi, tag * 1000ull, 1000, buf.data() + tag * 1000, tag}); }
    // One reap without waiting: each completion counted in `seen` by tag, and whole.
    void poll(std::map<uint64_t, int> &seen) {
        ReadCompletion c[8];
        const size_t n = backend->reap(c, false);
        for (size_t i = 0; i < n; ++i) {
            ++seen[c[i].tag];
            EXPECT_EQ(c[i].result, 1000) << c[i].tag;
        }
    }
    ReadFile file;
    std::unique_ptr<ReadBackend> backend;
    std::vector<uint8_t> buf;
    uint32_t fi = 0;
};

// Every read completes exactly once, with its bytes, however the ring's calls
// fail: a completion taken before a failing peek is handed over with the
// error left for the next call (thrown with it, its read would never
// complete), and reads stay in flight through a failing wait.
TEST(IoUringBackend, RingErrorsLoseNoCompletion) {
    if (!io_uring_unavailable_reason().empty()) GTEST_SKIP() << io_uring_unavailable_reason();
    const RandomFile data(8192, 6);
    for (const char *failing : {"peek", "wait"}) {
        SCOPED_TRACE(failing);
        int failures = 0;
        FailingRing ring(data.path, [&](std::string_view call, size_t taken) {
            if (call == "peek" && std::string_view(failing) == "wait" && failures == 0) return -EAGAIN;  // reach the wait
            // Part way through a batch for peek: after a completion was taken.
            if (call == failing && failures == 0 && (call == "wait" || taken > 0)) return ++failures, -EFAULT;
            return 0;
        });
        for (uint32_t tag = 0; tag < 4; ++tag) ring.submit(tag);
        std::map<uint64_t, int> seen;
        int errors = 0;
        while (ring.backend->in_flight() > 0 && errors < 3) {
            ReadCompletion c[8];
            size_t n = 0;
            std::string message;
            if (moe::test::status_of([&] { n = ring.backend->reap(c, true); }, &message) != moe::Status::ok) {
                ++errors;
                EXPECT_NE(message.find("errno " + std::to_string(EFAULT)), std::string::npos) << message;
                continue;
            }
            for (size_t i = 0; i < n; ++i) {
                ++seen[c[i].tag];
                EXPECT_EQ(c[i].result, 1000);
            }
        }
        EXPECT_EQ(failures, 1);
        EXPECT_EQ(errors, std::string_view(failing) == "wait" ? 1 : 0);
        EXPECT_EQ(seen, (std::map<uint64_t, int>{{0, 1}, {1, 1}, {2, 1}, {3, 1}}));
        EXPECT_EQ(0, std::memcmp(ring.buf.data(), data.bytes.data(), 4000));
    }
}

// The kernel drops completions it cannot keep and says so with -EBADR from a
// later peek or wait, not saying which. The reads whose completions were lost
// are found (they have not reported when a drain marker submitted after
// them completes) and read again; those submitted after the marker and those
// that reported are not repeated. Polled with a deadline: without the
// recovery the lost reads never complete.
TEST(IoUringBackend, DroppedCompletionsAreFoundAndReadAgain) {
    if (!io_uring_unavailable_reason().empty()) GTEST_SKIP() << io_uring_unavailable_reason();
    const RandomFile data(8192, 7);
    for (const int dropped_every : {2, 3}) {
        SCOPED_TRACE(dropped_every);
        int taken = 0, dropped = 0;
        bool report = false;
        FailingRing ring(data.path, [&](std::string_view call, size_t) {
            if (call == "drop" && taken++ % dropped_every == 0 && dropped < 3) return ++dropped, report = true, -1;
            if (call == "peek" && report) return report = false, -EBADR;
            return 0;
        });
        for (uint32_t tag = 0; tag < 5; ++tag) ring.submit(tag);
        std::map<uint64_t, int> seen;
        bool more_submitted = false;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (ring.backend->in_flight() > 0 && std::chrono::steady_clock::now() < deadline) {
            ring.poll(seen);
            // Reads submitted while a drain marker may be pending.
            if (dropped > 0 && !more_submitted) {
                for (uint32_t tag = 5; tag < 8; ++tag) ring.submit(tag);
                more_submitted = true;
            }
        }
        EXPECT_EQ(ring.backend->in_flight(), 0u);
        EXPECT_EQ(dropped, 3);
        EXPECT_EQ(seen, (std::map<uint64_t, int>{{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}, {7, 1}}));
        EXPECT_EQ(0, std::memcmp(ring.buf.data(), data.bytes.data(), 8000));
    }
}

// A second -EBADR while the submission queue has no room for its drain
// marker: the marker goes out later, after the first marker's orphans were
// found. An orphan read again after that marker is not its suspect (the read
// starts only once the marker completes), so it is not read a third time,
// and no read completes twice.
TEST(IoUringBackend, AnOrphanReadAgainAfterALaterMarkerCompletesOnce) {
    if (!io_uring_unavailable_reason().empty()) GTEST_SKIP() << io_uring_unavailable_reason();
    const RandomFile data(8192, 9);
    // The reads complete at submission (the file is in the page cache), so
    // the ring holds their five completions when reap starts: tag 0's is
    // dropped, -EBADR issues the first marker, a second -EBADR finds the
    // queue full until the other four reads and the first marker have
    // reported (five completions), which makes tag 0 an orphan first.
    enum { first_drop, first_report, second_report, full_queue, settled } phase = first_drop;
    int taken_while_full = 0, entries_after = 0;
    FailingRing ring(data.path, [&](std::string_view call, size_t) {
        if (call == "drop" && phase == first_drop) return phase = first_report, -1;
        if (call == "peek" && phase == first_report) return phase = second_report, -EBADR;
        if (call == "peek" && phase == second_report) return phase = full_queue, -EBADR;
        if (call == "drop" && phase == full_queue) ++taken_while_full;
        if (call == "sqe" && phase == full_queue) {
            if (taken_while_full < 5) return -1;
            phase = settled;
        }
        if (call == "sqe" && phase == settled) ++entries_after;
        return 0;
    });
    for (uint32_t tag = 0; tag < 5; ++tag) ring.submit(tag);
    std::map<uint64_t, int> seen;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (ring.backend->in_flight() > 0 && std::chrono::steady_clock::now() < deadline) ring.poll(seen);
    // Completions of a read submitted twice would still be on their way.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ring.poll(seen);
    EXPECT_EQ(phase, settled);
    EXPECT_EQ(entries_after, 2) << "the second marker and one read of tag 0";
    EXPECT_EQ(ring.backend->in_flight(), 0u);
    EXPECT_EQ(seen, (std::map<uint64_t, int>{{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}}));
    EXPECT_EQ(0, std::memcmp(ring.buf.data(), data.bytes.data(), 5000));
}

// A submission the kernel refuses for the moment (EBUSY: completions to take
// first; EAGAIN: short of memory) leaves the read queued, not failed: it goes
// to the kernel with the wait for it, which does not block on a read the
// kernel never got.
TEST(IoUringBackend, ARefusedSubmitGoesWithTheWait) {
    if (!io_uring_unavailable_reason().empty()) GTEST_SKIP() << io_uring_unavailable_reason();
    const RandomFile data(8192, 8);
    for (const int refusal : {EBUSY, EAGAIN}) {
        int refused = 0;
        FailingRing ring(data.path, [&](std::string_view call, size_t) {
            return call == "submit" && refused++ == 0 ? -refusal : 0;
        });
        ring.submit(2);
        EXPECT_EQ(refused, 1);
        ReadCompletion c[1];
        ASSERT_EQ(ring.backend->reap(c, true), 1u);
        EXPECT_EQ(c[0].tag, 2u);
        EXPECT_EQ(c[0].result, 1000);
        EXPECT_EQ(0, std::memcmp(ring.buf.data() + 2000, data.bytes.data() + 2000, 1000));
    }
}

// Starting the pool's threads can fail part way (a pids limit, no address
// space for a stack): the backend reports it instead of leaving the threads it
// did start joinable, whose destruction would end the process.
TEST(PreadBackend, ThreadsThatCannotStartAreAnError) {
    if (!moe::test::thread_limits_work()) GTEST_SKIP() << "an address-space limit cannot be set under a sanitizer";
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(std::_Exit(moe::test::exit_code_when_threads_cannot_start([] { make_pread_backend(16, 8); })),
                ::testing::ExitedWithCode(0), "");
}
