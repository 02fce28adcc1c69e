// AvailableMemoryReader: what process_available_memory() gives, read again
// and again (once per step under memory pressure) without allocating. The
// files it reads are a system written out by hand: /proc/meminfo,
// /proc/self/cgroup and cgroup hierarchies (v2, v1).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <new>
#include <string>

#include "common/cgroup_memory.hpp"
#include "support/paths.hpp"

// Every allocation of this thread is counted, so that a test can show that
// reads after the first allocate nothing.
namespace {
thread_local uint64_t t_allocations = 0;
}
void *operator new(std::size_t bytes) {
    ++t_allocations;
    if (void *p = std::malloc(bytes ? bytes : 1)) return p;
    throw std::bad_alloc();
}
void operator delete(void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }

namespace {

namespace fs = std::filesystem;
using moe::AvailableMemoryReader;
constexpr uint64_t K = 1ull << 10, M = 1ull << 20, G = 1ull << 30;

class FakeSystem : public ::testing::Test {
protected:
    void SetUp() override { root_ = fs::path(moe::test::scratch_dir()) / "system"; }
    void TearDown() override { fs::remove_all(root_); }

    void write(const fs::path &rel, const std::string &text) {
        fs::create_directories((root_ / rel).parent_path());
        std::ofstream(root_ / rel) << text;
    }
    void remove(const fs::path &rel) { fs::remove(root_ / rel); }
    void meminfo_available(uint64_t bytes) {
        write("meminfo", "MemTotal:       99999999 kB\nMemFree:  5 kB\nMemAvailable:   " +
                             std::to_string(bytes / K) + " kB\nBuffers: 7 kB\n");
    }
    // One level of the v2 hierarchy.
    void level(const std::string &rel, const std::string &max, uint64_t current, uint64_t file, uint64_t shmem) {
        write("v2/" + rel + "/memory.max", max + "\n");
        write("v2/" + rel + "/memory.current", std::to_string(current) + "\n");
        write("v2/" + rel + "/memory.stat", "anon 1\nfile " + std::to_string(file) + "\nkernel 2\nshmem " +
                                                std::to_string(shmem) + "\n");
    }
    AvailableMemoryReader::Sources sources() const {
        AvailableMemoryReader::Sources s;
        s.meminfo = (root_ / "meminfo").string();
        s.proc_cgroup = (root_ / "self-cgroup").string();
        s.v2_mounts[0] = (root_ / "v2").string();
        s.v2_mounts[1] = (root_ / "unified").string();
        s.v1_mount = (root_ / "v1").string();
        return s;
    }
    std::string v2_root() const { return (root_ / "v2").string(); }

    fs::path root_;
};

TEST_F(FakeSystem, ReaderSeesEachChangeOnTheNextRead) {
    meminfo_available(8 * G);
    write("self-cgroup", "0::/box/job\n");
    level("box", std::to_string(6 * G), 3 * G, 1 * G, 0);  // 6 - (3 - 1) = 4 GiB
    level("box/job", "max", 1 * G, 0, 0);
    AvailableMemoryReader reader(sources());
    EXPECT_EQ(reader.cgroup_headroom(), 4 * G);
    EXPECT_EQ(reader.available_bytes(), 4 * G);

    write("v2/box/memory.max", std::to_string(5 * G) + "\n");
    EXPECT_EQ(reader.available_bytes(), 3 * G);
    meminfo_available(2 * G);
    EXPECT_EQ(reader.available_bytes(), 2 * G);
    level("box/job", std::to_string(3 * G), 2 * G, 1 * G, 1 * G);  // shmem cannot be dropped: 1 GiB
    EXPECT_EQ(reader.available_bytes(), 1 * G);
    EXPECT_EQ(reader.cgroup_headroom(), moe::cgroup_memory_headroom("/box/job", v2_root()));

    // A file replaced under its name (rename) is read anew, not through the
    // descriptor of the one it replaced.
    write("new-max", std::to_string(2 * G + G / 2) + "\n");
    fs::rename(root_ / "new-max", root_ / "v2/box/job/memory.max");
    EXPECT_EQ(reader.available_bytes(), G / 2);
}

TEST_F(FakeSystem, ReaderTakesMissingAndMalformedFilesAsTheOneShotReadDid) {
    meminfo_available(64 * G);
    write("self-cgroup", "0::/job\n");
    level("job", std::to_string(8 * G), 5 * G, 2 * G, 0);
    AvailableMemoryReader reader(sources());
    EXPECT_EQ(reader.available_bytes(), 5 * G);

    remove("v2/job/memory.stat");  // no droppable page cache known
    EXPECT_EQ(reader.available_bytes(), 3 * G);
    remove("v2/job/memory.current");  // no usage known
    EXPECT_EQ(reader.available_bytes(), 8 * G);
    level("job", std::to_string(8 * G), 5 * G, 2 * G, 0);  // back again: found again
    EXPECT_EQ(reader.available_bytes(), 5 * G);

    // memory.stat is read up to its first value that is not a number.
    write("v2/job/memory.stat", "file " + std::to_string(3 * G) + "\nodd x\nshmem " + std::to_string(G) + "\n");
    EXPECT_EQ(reader.available_bytes(), 6 * G);
    // Longer than the reader's buffer, with a line longer than it: keys past
    // both still count.
    std::string big;
    for (int i = 0; i < 2000; ++i) big += "pad_" + std::to_string(i) + " 1\n";
    big += std::string(10000, 'k') + " 1\nfile " + std::to_string(4 * G) + "\nshmem " + std::to_string(G) + "\n";
    write("v2/job/memory.stat", big);
    EXPECT_EQ(reader.available_bytes(), 6 * G);
    EXPECT_EQ(moe::cgroup_memory_headroom("/job", v2_root()), 6 * G);

    write("v2/job/memory.max", "garbage\n");  // no limit at this level
    EXPECT_FALSE(reader.cgroup_headroom().has_value());
    EXPECT_EQ(reader.available_bytes(), 64 * G);
    remove("v2/job/memory.max");
    EXPECT_EQ(reader.available_bytes(), 64 * G);
    write("v2/job/memory.max", "\n\n  " + std::to_string(5 * G + M) + " \n");  // the first word counts
    EXPECT_EQ(reader.available_bytes(), 3 * G + M);

    // Without MemAvailable the machine's available pages (sysconf) stand in;
    // the cgroup's headroom is far less than those.
    write("v2/job/memory.max", std::to_string(2 * G + M) + "\n");
    EXPECT_EQ(reader.available_bytes(), M);
    write("meminfo", "MemTotal: 100 kB\nMemAvailable: x kB\n");
    EXPECT_EQ(reader.available_bytes(), M);
    remove("meminfo");
    EXPECT_EQ(reader.available_bytes(), M);
    remove("v2/job/memory.max");
    EXPECT_GT(reader.available_bytes(), M);

    remove("self-cgroup");  // no cgroup known
    write("v2/job/memory.max", std::to_string(3 * G + M) + "\n");
    EXPECT_FALSE(reader.cgroup_headroom().has_value());
}

TEST_F(FakeSystem, ReaderFollowsTheProcessIntoAnotherCgroup) {
    meminfo_available(64 * G);
    level("a", std::to_string(2 * G), 1 * G, 0, 0);
    level("b", std::to_string(9 * G), 2 * G, 0, 0);
    write("self-cgroup", "0::/a\n");
    AvailableMemoryReader reader(sources());
    EXPECT_EQ(reader.available_bytes(), 1 * G);
    write("self-cgroup", "0::/b\n");
    EXPECT_EQ(reader.available_bytes(), 7 * G);
}

TEST_F(FakeSystem, ReaderFallsBackToTheV1ControllerAndThenToMemAvailable) {
    meminfo_available(64 * G);
    write("self-cgroup", "5:devices:/\n4:cpu,memory:/job\n0::/\n");
    fs::create_directories(root_ / "v2");  // the root level has no memory.max
    auto v1 = [&](uint64_t limit, uint64_t usage, uint64_t cache, uint64_t shmem) {
        write("v1/job/memory.usage_in_bytes", std::to_string(usage) + "\n");
        write("v1/job/memory.stat", "cache 5\nrss 7\nhierarchical_memory_limit " + std::to_string(limit) +
                                        "\ntotal_cache " + std::to_string(cache) + "\ntotal_shmem " +
                                        std::to_string(shmem) + "\n");
    };
    v1(8 * G, 6 * G, 3 * G, 1 * G);  // 8 - (6 - (3 - 1)) = 4 GiB
    AvailableMemoryReader reader(sources());
    EXPECT_EQ(reader.available_bytes(), 4 * G);
    v1(8 * G, 7 * G, 0, 0);
    EXPECT_EQ(reader.available_bytes(), 1 * G);
    v1(9223372036854771712ull, 6 * G, 0, 0);  // unlimited
    EXPECT_EQ(reader.available_bytes(), 64 * G);
    v1(8 * G, 6 * G, 0, 0);
    remove("v1/job/memory.stat");
    EXPECT_EQ(reader.available_bytes(), 64 * G);

    // A v2 limit, in the hybrid layout's hierarchy, takes precedence.
    write("unified/memory.max", std::to_string(G) + "\n");
    write("unified/memory.current", "0\n");
    v1(8 * G, 6 * G, 0, 0);
    EXPECT_EQ(reader.available_bytes(), 1 * G);
}

TEST_F(FakeSystem, ReadsAfterTheFirstAllocateNothing) {
    meminfo_available(64 * G);
    write("self-cgroup", "0::/box/app/job\n");
    level("box", std::to_string(8 * G), 5 * G, 2 * G, 0);
    level("box/app", "max", 3 * G, 1 * G, 0);
    level("box/app/job", std::to_string(16 * G), 4 * G, 0, 0);
    AvailableMemoryReader reader(sources());
    EXPECT_EQ(reader.available_bytes(), 5 * G);
    const uint64_t before = t_allocations;
    uint64_t sum = 0;
    for (int i = 0; i < 100; ++i) sum += reader.available_bytes();
    EXPECT_EQ(t_allocations - before, 0u);
    EXPECT_EQ(sum, 100 * 5 * G);
    // The count sees allocations: a one-shot read names its files anew.
    const uint64_t one_shot = t_allocations;
    EXPECT_EQ(moe::cgroup_memory_headroom("/box/app/job", v2_root()), 5 * G);
    EXPECT_GT(t_allocations, one_shot);
}

TEST(AvailableMemory, ThisProcessesReadsAfterTheFirstAllocateNothing) {
    AvailableMemoryReader reader;
    const uint64_t first = reader.available_bytes();
    EXPECT_GT(first, 0u);
    const uint64_t before = t_allocations;
    bool all_positive = true;
    for (int i = 0; i < 20; ++i) all_positive = all_positive && reader.available_bytes() > 0;
    EXPECT_EQ(t_allocations - before, 0u);
    EXPECT_TRUE(all_positive);
    EXPECT_EQ(reader.cgroup_headroom().has_value(), moe::process_cgroup_memory_headroom().has_value());
}

}  // namespace
