// DirectFallbackBackend: a read the filesystem refuses through O_DIRECT
// (EINVAL) is read again through the buffered twin, invisibly to the caller
// and to the decorators above; the file's later reads go buffered at once,
// other files stay direct, and other errors, cancellation and the queue
// accounting behave as without it.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <vector>

#include "common/error.hpp"
#include "experts/slot_arena.hpp"
#include "io/direct_fallback.hpp"
#include "io/observed_backend.hpp"
#include "io/read_file.hpp"
#include "support/paths.hpp"
#include "support/read_backends.hpp"

namespace {

using namespace moe;
using namespace moe::io;

std::vector<uint8_t> write_random_file(const std::string &path, size_t size, uint32_t seed) {
    std::vector<uint8_t> bytes(size);
    std::mt19937 rng(seed);
    for (auto &b : bytes) b = uint8_t(rng());
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(size));
    return bytes;
}

size_t count_file(const std::vector<ReadRequest> &requests, uint32_t file) {
    size_t n = 0;
    for (const ReadRequest &r : requests) n += r.file == file;
    return n;
}

// Real reads of two files, one of which the "filesystem" refuses O_DIRECT
// reads of; an ObservedBackend on top counts what its caller sees.
struct TwoFiles {
    std::string dir = test::scratch_dir();
    std::vector<uint8_t> bytes_a = write_random_file(dir + "/a.bin", 1 << 20, 1);
    std::vector<uint8_t> bytes_b = write_random_file(dir + "/b.bin", 1 << 20, 2);
    ReadFile a{dir + "/a.bin", true}, b{dir + "/b.bin", true};
    SlotArena memory{4 << 20};
    test::RefusingBackend *refusing = nullptr;
    DirectFallbackBackend *fallback = nullptr;
    std::unique_ptr<ObservedBackend> observed;
    uint32_t id_a = 0, id_b = 0;

    TwoFiles() {
        auto r = std::make_unique<test::RefusingBackend>(make_pread_backend(4), [this](int fd) { return fd == a.direct_fd(); });
        refusing = r.get();
        auto f = std::make_unique<DirectFallbackBackend>(std::move(r));
        fallback = f.get();
        observed = std::make_unique<ObservedBackend>(std::move(f));
        id_a = fallback->add_read_file(a);
        id_b = fallback->add_read_file(b);
    }
    ~TwoFiles() { std::filesystem::remove_all(dir); }
    // Reads each (file, offset, length) into its own 1 MiB of memory, tagged
    // 100 + its position; checks the caller's tags and the exact bytes.
    void read(const std::vector<ReadRequest> &reads) {
        for (size_t i = 0; i < reads.size(); ++i) {
            ReadRequest r = reads[i];
            r.dest = memory.data() + (i << 20);
            r.tag = 100 + i;
            observed->submit(r);
        }
        std::map<uint64_t, int64_t> results;
        while (observed->in_flight() > 0) {
            ReadCompletion done[4];
            const size_t n = observed->reap(done, true);
            ASSERT_GT(n, 0u) << "a waiting reap came back empty";
            for (size_t i = 0; i < n; ++i) results[done[i].tag] = done[i].result;
        }
        ASSERT_EQ(reads.size(), results.size());
        for (size_t i = 0; i < reads.size(); ++i) {
            const ReadRequest &r = reads[i];
            ASSERT_EQ(int64_t(r.length), results[100 + i]) << "read " << i;
            const uint8_t *want = (r.file == id_a ? bytes_a : bytes_b).data() + r.offset;
            EXPECT_EQ(0, std::memcmp(memory.data() + (i << 20), want, r.length)) << "read " << i;
        }
    }
};

TEST(DirectFallback, RefusedReadIsReadAgainBufferedAndTheFileStaysBuffered) {
    TwoFiles t;
    if (!t.a.direct() || !t.b.direct()) GTEST_SKIP() << "no O_DIRECT on this filesystem";
    const uint32_t buffered_a = t.fallback->buffered_twin(t.id_a);
    ASSERT_NE(buffered_a, t.id_a);

    t.read({ReadRequest{t.id_a, 8192, 16384}, ReadRequest{t.id_b, 0, 12288}});
    EXPECT_EQ(1u, t.refusing->refused);
    EXPECT_EQ(1u, t.fallback->retried());
    // The retry: the refused read's offset, length and memory, through the twin.
    ASSERT_EQ(3u, t.refusing->submitted.size());
    const ReadRequest &refused = t.refusing->submitted[0];
    const ReadRequest &again = t.refusing->submitted[2];
    EXPECT_EQ(t.id_a, refused.file);
    EXPECT_EQ(buffered_a, again.file);
    EXPECT_EQ(refused.offset, again.offset);
    EXPECT_EQ(refused.length, again.length);
    EXPECT_EQ(refused.dest, again.dest);
    EXPECT_FALSE(t.fallback->reads_direct(t.id_a));
    EXPECT_TRUE(t.fallback->reads_direct(t.id_b));
    // The caller saw two reads, each once.
    EXPECT_EQ(2u, t.observed->activity().reads);
    EXPECT_EQ(16384u + 12288u, t.observed->activity().bytes);

    // Later reads of the refused file go buffered with no failed attempt;
    // the other file's still go direct.
    t.read({ReadRequest{t.id_a, 4096, 4096}, ReadRequest{t.id_a, 1 << 19, 65536}, ReadRequest{t.id_b, 40960, 8192}});
    EXPECT_EQ(1u, count_file(t.refusing->submitted, t.id_a));
    EXPECT_EQ(3u, count_file(t.refusing->submitted, buffered_a));
    EXPECT_EQ(2u, count_file(t.refusing->submitted, t.id_b));
    EXPECT_EQ(1u, t.refusing->refused);
    EXPECT_EQ(1u, t.fallback->retried());
}

// Scripted completions: the decorator over a backend the test drives.
struct Scripted {
    test::ScriptedBackend *script;
    DirectFallbackBackend fallback;
    explicit Scripted(uint32_t depth) : Scripted(std::make_unique<test::ScriptedBackend>(depth)) {}
    explicit Scripted(std::unique_ptr<test::ScriptedBackend> s) : script(s.get()), fallback(std::move(s)) {
        fallback.pair(0, 1);  // file 0 reads O_DIRECT, file 1 is its buffered twin
    }
    std::vector<ReadCompletion> reap() {
        ReadCompletion out[8];
        return std::vector<ReadCompletion>(out, out + fallback.reap(out, false));
    }
    // Completes the newest read the inner backend saw.
    void complete_last(int64_t result) { script->complete(script->submitted.back().tag, result); }
};

TEST(DirectFallback, OtherErrorsAndBufferedEinvalPassThrough) {
    Scripted s(4);
    s.fallback.submit(ReadRequest{0, 0, 4096, nullptr, 7});
    s.complete_last(-EIO);
    auto done = s.reap();
    ASSERT_EQ(1u, done.size());
    EXPECT_EQ(7u, done[0].tag);
    EXPECT_EQ(-EIO, done[0].result);
    EXPECT_TRUE(s.fallback.reads_direct(0));  // only EINVAL says O_DIRECT is refused

    // EINVAL of a buffered read is the read's own failure: not retried.
    s.fallback.submit(ReadRequest{1, 0, 4096, nullptr, 8});
    s.complete_last(-EINVAL);
    done = s.reap();
    ASSERT_EQ(1u, done.size());
    EXPECT_EQ(8u, done[0].tag);
    EXPECT_EQ(-EINVAL, done[0].result);
    EXPECT_EQ(2u, s.script->submitted.size());
    EXPECT_EQ(0u, s.fallback.retried());
}

TEST(DirectFallback, RetryCountsAsInFlightAndCanBeCancelled) {
    Scripted s(2);
    std::vector<uint8_t> memory(8192);
    s.fallback.submit(ReadRequest{0, 4096, 8192, memory.data(), 7});
    s.complete_last(-EINVAL);
    EXPECT_TRUE(s.reap().empty());  // the retry runs: nothing to report yet
    EXPECT_EQ(1u, s.fallback.in_flight());
    EXPECT_EQ(2u, s.fallback.queue_depth());
    ASSERT_EQ(2u, s.script->submitted.size());
    EXPECT_EQ(1u, s.script->submitted[1].file);
    EXPECT_EQ(memory.data(), s.script->submitted[1].dest);

    s.fallback.submit(ReadRequest{0, 0, 4096, memory.data(), 8});  // fills the queue, straight to the twin
    EXPECT_EQ(2u, s.fallback.in_flight());
    EXPECT_EQ(1u, s.script->submitted[2].file);

    s.fallback.cancel(7);  // reaches the retry
    ASSERT_EQ(1u, s.script->cancelled.size());
    EXPECT_EQ(s.script->submitted[1].tag, s.script->cancelled[0]);
    s.script->complete(s.script->submitted[1].tag, -ECANCELED);
    s.complete_last(4096);
    const auto done = s.reap();
    ASSERT_EQ(2u, done.size());
    EXPECT_EQ(7u, done[0].tag);
    EXPECT_EQ(-ECANCELED, done[0].result);
    EXPECT_EQ(8u, done[1].tag);
    EXPECT_EQ(4096, done[1].result);
    EXPECT_EQ(0u, s.fallback.in_flight());
}

// Cancelled while the O_DIRECT attempt ran, which the filesystem then
// refused: the caller gave the read up, so it is not read again.
TEST(DirectFallback, ReadCancelledBeforeTheRefusalIsNotRetried) {
    Scripted s(2);
    s.fallback.submit(ReadRequest{0, 0, 4096, nullptr, 9});
    s.fallback.cancel(9);
    s.complete_last(-EINVAL);
    const auto done = s.reap();
    ASSERT_EQ(1u, done.size());
    EXPECT_EQ(9u, done[0].tag);
    EXPECT_EQ(-ECANCELED, done[0].result);
    EXPECT_EQ(1u, s.script->submitted.size());
    EXPECT_FALSE(s.fallback.reads_direct(0));
    EXPECT_EQ(0u, s.fallback.in_flight());
}

}  // namespace

// A completion for a slot with no read in flight (an inner backend that
// queued a read and then threw, or a duplicate) would free the slot twice:
// it is an internal error, not a completion handed to some caller.
TEST(DirectFallback, CompletionForNoReadInFlightIsAnInternalError) {
    Scripted s(4);
    s.fallback.submit(ReadRequest{0, 0, 4096, nullptr, 7});
    s.complete_last(4096);
    ASSERT_EQ(1u, s.reap().size());
    s.script->complete(s.script->submitted.back().tag, 4096);  // the same slot again
    try {
        s.reap();
        FAIL() << "a stray completion was accepted";
    } catch (const moe::Error &e) {
        EXPECT_EQ(moe::Status::internal, e.status());
    }
    s.script->complete(99, 0);  // no such slot
    EXPECT_THROW(s.reap(), moe::Error);
}
