// ObservedBackend (device busy time as a union of read intervals, the bounded
// read log), its use by StreamingExpertSource, and the replay of a log.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

#include "common/error.hpp"
#include "experts/streaming_source.hpp"
#include "io/observed_backend.hpp"
#include "io/read_replay.hpp"
#include "support/paths.hpp"
#include "support/read_backends.hpp"

namespace {

using namespace moe;
using namespace moe::io;

uint64_t g_now = 0;
uint64_t fake_clock() { return g_now; }

using test::ScriptedBackend;

struct Scripted {
    ScriptedBackend *script;
    ObservedBackend observed;
    explicit Scripted(std::unique_ptr<ScriptedBackend> b = std::make_unique<ScriptedBackend>())
        : script(b.get()), observed(std::move(b), &fake_clock) {}
    void submit(uint64_t tag, uint32_t length = 4096, uint64_t offset = 0, uint32_t file = 0) {
        observed.submit(ReadRequest{file, offset, length, nullptr, tag});
    }
    size_t reap() {
        ReadCompletion out[8];
        return observed.reap(out, false);
    }
};

TEST(ObservedBackend, OverlappingReadsCountOnceAndIdleGapsNotAtAll) {
    Scripted s;
    g_now = 1000;
    s.submit(1);
    g_now = 1010;
    s.submit(2);  // overlaps read 1
    g_now = 1030;
    s.script->complete(1, 4096);
    EXPECT_EQ(1u, s.reap());
    EXPECT_EQ(30u, s.observed.activity().busy_ns);  // read 2 still in flight: the open period counts
    EXPECT_EQ(30u + 20u, s.observed.activity().read_ns);
    g_now = 1050;
    s.script->complete(2, 4096);
    EXPECT_EQ(1u, s.reap());
    g_now = 1100;  // idle from 1050 to 1100
    EXPECT_EQ(50u, s.observed.activity().busy_ns);
    s.submit(3, 100);
    g_now = 1120;
    s.script->complete(3, 100);
    s.reap();
    const IoActivity a = s.observed.activity();
    // A sum over reads would give 30 + 40 + 20: that is read_ns.
    EXPECT_EQ(70u, a.busy_ns);
    EXPECT_EQ(90u, a.read_ns);
    EXPECT_EQ(3u, a.reads);
    EXPECT_EQ(4096u + 4096u + 100u, a.bytes);
}

TEST(ObservedBackend, BatchedCompletionsAndFailuresAndReset) {
    Scripted s;
    g_now = 0;
    s.submit(1);
    s.submit(2);
    s.submit(3);
    g_now = 40;
    s.script->complete(3, -5);    // failed: a read, no bytes
    s.script->complete(1, 2048);  // short at end of file: its bytes
    EXPECT_EQ(2u, s.reap());
    EXPECT_EQ(0u, s.reap());  // nothing new: no change
    g_now = 60;
    s.observed.reset_activity();  // read 2 in flight: counts from 60
    g_now = 90;
    s.script->complete(2, 4096);
    s.reap();
    g_now = 500;
    const IoActivity a = s.observed.activity();
    EXPECT_EQ(30u, a.busy_ns);
    EXPECT_EQ(30u, a.read_ns);  // only read 2 after the reset
    EXPECT_EQ(1u, a.reads);
    EXPECT_EQ(4096u, a.bytes);
}

TEST(ObservedBackend, LogHoldsExactlyTheReadsSubmittedUpToCapacity) {
    Scripted s;
    EXPECT_FALSE(s.observed.logging());
    s.submit(99, 4096, 12345);  // before the log starts: not logged
    s.observed.start_log(5);
    std::mt19937_64 rng(3);
    for (uint64_t i = 0; i < 8; ++i)
        s.submit(i, uint32_t(1 + rng() % 100000), rng() % (1ull << 40), uint32_t(rng() % 3));
    ASSERT_EQ(5u, s.observed.log().size());
    EXPECT_EQ(3u, s.observed.log_dropped());
    for (size_t i = 0; i < 5; ++i) {
        const ReadRequest &r = s.script->submitted[i + 1];
        EXPECT_EQ(r.offset, s.observed.log()[i].offset) << i;
        EXPECT_EQ(r.length, s.observed.log()[i].length) << i;
        EXPECT_EQ(r.file, s.observed.log()[i].file) << i;
    }
    s.observed.start_log(2);  // restart: earlier entries and drops forgotten
    EXPECT_EQ(0u, s.observed.log().size());
    EXPECT_EQ(0u, s.observed.log_dropped());
    s.submit(50, 8192, 4096);
    ASSERT_EQ(1u, s.observed.log().size());
    EXPECT_EQ(8192u, s.observed.log()[0].length);
    s.observed.start_log(0);
    EXPECT_FALSE(s.observed.logging());
    s.submit(51);
    EXPECT_EQ(0u, s.observed.log().size());
    EXPECT_EQ(0u, s.observed.log_dropped());
}

std::string write_file(const std::string &path, size_t size, uint32_t seed) {
    std::vector<char> bytes(size);
    std::mt19937 rng(seed);
    for (char &b : bytes) b = char(rng());
    std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
    return path;
}

TEST(ReadReplay, ReplaysEveryLoggedReadOfTheFile) {
    const std::string path = write_file(test::scratch_dir() + "/data.bin", 1 << 20, 9);
    ReadFile file(path, false);
    ObservedBackend names(make_pread_backend(4), &fake_clock);
    const uint32_t index = names.add_file(file.buffered_fd());
    names.name_file(index, path);
    std::vector<LoggedRead> log;
    uint64_t expect_bytes = 0;
    std::mt19937_64 rng(4);
    for (int i = 0; i < 40; ++i) {
        const uint32_t length = uint32_t(4096 * (1 + rng() % 8));
        const uint64_t offset = 4096 * (rng() % 200);
        log.push_back(LoggedRead{offset, length, index});
        expect_bytes += length;
    }
    log.push_back(LoggedRead{(1 << 20) - 4096, 8192, index});  // past the end: short, as the engine's last slice
    expect_bytes += 4096;
    const ReplayFigures f = replay_reads(log, names, 3, BackendKind::pread);
    EXPECT_EQ(log.size(), f.reads);
    EXPECT_EQ(expect_bytes, f.bytes);
    EXPECT_EQ(3u, f.depth);
    EXPECT_STREQ("pread", f.backend.c_str());

    const LoggedRead stray{0, 4096, index + 7};
    EXPECT_THROW(replay_reads(std::span<const LoggedRead>(&stray, 1), names, 2, BackendKind::pread), Error);
    EXPECT_EQ(0u, replay_reads({}, names, 2, BackendKind::pread).reads);
}

// A read that fails while others are in flight: the replay reports it, and
// the reads still in flight finish before their memory is freed (the
// sanitizer build catches a write into freed memory).
TEST(ReadReplay, FailedReadIsReportedAfterTheOthersLand) {
    const std::string dir = test::scratch_dir();
    const std::string path = write_file(dir + "/data.bin", 1 << 20, 10);
    const std::string not_a_file = dir + "/a-directory";
    std::filesystem::create_directory(not_a_file);
    // ReadFile refuses a directory at open; its descriptor's reads fail (EISDIR).
    struct Fd {
        int fd;
        ~Fd() {
            if (fd >= 0) ::close(fd);
        }
    } bad{::open(not_a_file.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
    ASSERT_GE(bad.fd, 0);
    ReadFile file(path, false);
    ObservedBackend names(make_pread_backend(4), &fake_clock);
    const uint32_t good = names.add_file(file.buffered_fd()), broken = names.add_file(bad.fd);
    names.name_file(good, path);
    names.name_file(broken, not_a_file);
    std::vector<LoggedRead> log{LoggedRead{0, 4096, broken}};
    for (uint64_t i = 0; i < 64; ++i) log.push_back(LoggedRead{4096 * i, 4096, good});
    try {
        replay_reads(log, names, 8, BackendKind::pread);
        FAIL() << "a read of a directory succeeded";
    } catch (const Error &e) {
        EXPECT_EQ(e.status(), Status::io);
        EXPECT_NE(std::string(e.what()).find("a-directory"), std::string::npos) << e.what();
    }
}

// A filesystem that accepts O_DIRECT at open but refuses the reads: the
// replay reads the file buffered, as the engine did, and counts those reads
// as buffered along with the unaligned one.
TEST(ReadReplay, ODirectRefusedForReadsIsReplayedBuffered) {
    const std::string path = write_file(test::scratch_dir() + "/data.bin", 1 << 20, 11);
    if (!ReadFile(path, true).direct()) GTEST_SKIP() << "no O_DIRECT on this filesystem";
    ReadFile file(path, false);
    ObservedBackend names(make_pread_backend(4), &fake_clock);
    const uint32_t index = names.add_file(file.buffered_fd());
    names.name_file(index, path);
    std::vector<LoggedRead> log;
    for (uint64_t i = 0; i < 16; ++i) log.push_back(LoggedRead{3 * 4096 * i, 8192, index});
    log.push_back(LoggedRead{100, 5000, index});  // unaligned: buffered anyway
    const ReplayFigures f = replay_reads(log, names, 4, BackendKind::pread,
                                         std::make_unique<test::RefusingBackend>(make_pread_backend(4)));
    EXPECT_EQ(17u, f.reads);
    EXPECT_EQ(16u * 8192 + 5000, f.bytes);
    EXPECT_EQ(17u, f.buffered_reads);
}

// Records what the streaming source submits, then reads with pread.
class RecordingBackend final : public ReadBackend {
public:
    explicit RecordingBackend(std::vector<ReadRequest> *into) : inner_(make_pread_backend(8)), into_(into) {}
    const char *name() const override { return inner_->name(); }
    uint32_t add_file(int fd) override { return inner_->add_file(fd); }
    uint32_t queue_depth() const override { return inner_->queue_depth(); }
    uint32_t in_flight() const override { return inner_->in_flight(); }
    void submit(const ReadRequest &r) override {
        into_->push_back(r);
        inner_->submit(r);
    }
    void cancel(uint64_t tag) override { inner_->cancel(tag); }
    size_t reap(std::span<ReadCompletion> out, bool wait) override { return inner_->reap(out, wait); }

private:
    std::unique_ptr<ReadBackend> inner_;
    std::vector<ReadRequest> *into_;
};

TEST(StreamingSourceReads, LogAndActivityMatchTheReadsIssued) {
    const std::string dir = test::scratch_dir();
    const int32_t n_layer = 3, n_expert = 6;
    const std::string path = write_file(dir + "/experts.bin", 200000, 5);
    StreamingSourceConfig cfg;
    uint64_t pos = 333;
    for (int32_t l = 0; l < n_layer; ++l) {
        ExpertLayerLayout L;
        L.n_expert = n_expert;
        for (ExpertMatrixLayout *m : {&L.gate, &L.up, &L.down}) {
            m->type = GgmlType::F32;
            m->cols = 16;
            m->rows = 8;
            m->file_offset = pos;
            m->expert_stride = 16 * 8 * 4;
            pos += m->expert_stride * n_expert + 20;
        }
        cfg.layers.push_back(L);
    }
    cfg.shard_paths = {path};
    cfg.direct = false;
    cfg.slots = n_expert;
    std::vector<ReadRequest> issued;
    cfg.backend_override = std::make_unique<RecordingBackend>(&issued);
    StreamingExpertSource src(std::move(cfg));
    ObservedBackend *observed = src.observed_reads();
    ASSERT_NE(nullptr, observed);
    observed->start_log(1000);
    const std::vector<std::vector<int32_t>> requests = {{0, 2, 5}, {1, 3}, {4, 0, 2}, {5}, {0, 1, 2, 3}, {2}};
    for (size_t i = 0; i < requests.size(); ++i) {
        const int32_t layer = int32_t(i % n_layer);
        src.begin_layer(layer, requests[i]);
        for (size_t k = 0; k < requests[i].size(); ++k) src.next_ready();
        src.end_layer(layer);
    }
    src.drain();
    ASSERT_FALSE(issued.empty());
    ASSERT_EQ(issued.size(), observed->log().size());
    uint64_t bytes = 0;
    for (size_t i = 0; i < issued.size(); ++i) {
        EXPECT_EQ(issued[i].offset, observed->log()[i].offset) << i;
        EXPECT_EQ(issued[i].length, observed->log()[i].length) << i;
        EXPECT_EQ(issued[i].file, observed->log()[i].file) << i;
        EXPECT_EQ(path, observed->file_path(issued[i].file)) << i;
        bytes += issued[i].length;
    }
    const IoActivity a = observed->activity();
    EXPECT_EQ(issued.size(), a.reads);
    EXPECT_EQ(bytes, a.bytes);
    EXPECT_EQ(0u, observed->log_dropped());
    const ReplayFigures f = replay_reads(observed->log(), *observed, 4, BackendKind::pread);
    EXPECT_EQ(issued.size(), f.reads);
    EXPECT_EQ(bytes, f.bytes);
}

}  // namespace
