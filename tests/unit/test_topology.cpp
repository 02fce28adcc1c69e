#include <gtest/gtest.h>
#include <numaif.h>

#include <sys/stat.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "common/numa_memory.hpp"
#include "common/thread_pool.hpp"
#include "common/topology.hpp"
#include "support/paths.hpp"

namespace {

TEST(Topology, CountsAreSane) {
    EXPECT_GE(moe::topology::physical_cores(), 1);
    EXPECT_GE(moe::topology::numa_nodes(), 1);
}

TEST(Topology, NumaNodeOfPathIsUnknownOrAValidNode) {
    const int node = moe::topology::numa_node_of_path(moe::test::source_dir());
    EXPECT_GE(node, -1);
    EXPECT_LT(node, moe::topology::numa_nodes());
    EXPECT_EQ(moe::topology::numa_node_of_path("/nonexistent/path/for/test"), -1);
}

TEST(Topology, BindingToCoreZeroWorksOrIsRefused) {
    // May legitimately fail in restricted containers; must not crash.
    (void)moe::topology::bind_thread_to_core(0);
    (void)moe::topology::bind_thread_to_numa_node(0);
    SUCCEED();
}

bool is_subset(const std::vector<int> &a, const std::vector<int> &b) {
    return std::includes(b.begin(), b.end(), a.begin(), a.end());
}

TEST(DevicePlacement, AllowedCpusAreSortedAndNonEmpty) {
    const std::vector<int> allowed = moe::topology::allowed_cpus();
    ASSERT_FALSE(allowed.empty());
    EXPECT_TRUE(std::is_sorted(allowed.begin(), allowed.end()));
    EXPECT_EQ(std::adjacent_find(allowed.begin(), allowed.end()), allowed.end());
}

TEST(DevicePlacement, SourceTreeDeviceGivesNonEmptySubsetOfAllowedCpus) {
    const std::vector<int> allowed = moe::topology::allowed_cpus();
    const auto p = moe::topology::placement_for_path(moe::test::source_dir() + "/CMakeLists.txt");
    ASSERT_FALSE(p.cpus.empty()) << p.how;
    EXPECT_TRUE(std::is_sorted(p.cpus.begin(), p.cpus.end()));
    EXPECT_TRUE(is_subset(p.cpus, allowed)) << moe::topology::cpu_list_text(p.cpus) << " vs "
                                            << moe::topology::cpu_list_text(allowed);
    EXPECT_FALSE(p.how.empty());
    EXPECT_GE(p.numa_node, -1);
    EXPECT_LT(p.numa_node, moe::topology::numa_nodes());
    // The same device answers the same, through a descriptor too.
    const int fd = ::open((moe::test::source_dir() + "/CMakeLists.txt").c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    const auto q = moe::topology::placement_for_fd(fd);
    ::close(fd);
    EXPECT_EQ(q.cpus, p.cpus);
    EXPECT_EQ(q.device, p.device);
    std::printf("source tree: device '%s', CPUs %s, node %d (%s)\n", p.device.c_str(),
                moe::topology::cpu_list_text(p.cpus).c_str(), p.numa_node, p.how.c_str());
}

TEST(DevicePlacement, FileOnTmpfsFallsBackToEveryAllowedCpu) {
    const std::string dir = "/dev/shm";
    struct statfs fs {};
    if (::statfs(dir.c_str(), &fs) != 0 || fs.f_type != 0x01021994 /* TMPFS_MAGIC */)
        GTEST_SKIP() << "no tmpfs at /dev/shm";
    const std::string path = dir + "/moestream-topology-test-" + std::to_string(::getpid());
    { std::ofstream(path) << "x"; }
    const auto p = moe::topology::placement_for_path(path);
    std::filesystem::remove(path);
    EXPECT_EQ(p.cpus, moe::topology::allowed_cpus());
    EXPECT_EQ(p.device, "");
    EXPECT_EQ(p.numa_node, -1);
    EXPECT_NE(p.how.find("no block device"), std::string::npos) << p.how;
}

TEST(DevicePlacement, MissingFileFallsBackToEveryAllowedCpu) {
    const auto p = moe::topology::placement_for_path("/nonexistent/path/for/test");
    EXPECT_EQ(p.cpus, moe::topology::allowed_cpus());
    EXPECT_EQ(p.numa_node, -1);
}

TEST(DevicePlacement, ThreadsCanBeBoundToTheDeviceCpus) {
    const auto p = moe::topology::placement_for_path(moe::test::source_dir());
    std::thread t([] {});
    // May be refused in restricted containers; must not crash, and binding an
    // empty set is always refused.
    (void)moe::topology::bind_thread_to_cpus(t, p.cpus);
    EXPECT_FALSE(moe::topology::bind_thread_to_cpus(t, {}));
    t.join();
    std::thread u([&] {
        if (moe::topology::bind_current_thread_to_cpus(p.cpus)) {
            // Bound: the thread now runs on one of the device's CPUs.
            const int cpu = sched_getcpu();
            if (cpu >= 0) EXPECT_TRUE(std::binary_search(p.cpus.begin(), p.cpus.end(), cpu)) << cpu;
        }
    });
    u.join();
}

std::vector<int> affinity_of_this_thread() {
    cpu_set_t set;
    CPU_ZERO(&set);
    std::vector<int> out;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) out.push_back(c);
    return out;
}

// In a process bound to CPU `only` (as by `taskset -c N` or `numactl
// --cpunodebind`): the number of checks that fail.
int checks_within_binding(int only) {
    int bad = 0;
    auto check = [&bad](bool ok, const char *what) {
        if (!ok) std::fprintf(stderr, "%s\n", what), ++bad;
    };
    const std::vector<int> just{only};
    check(moe::topology::physical_cores() == 1, "physical_cores() counts cores outside the binding");
    check(moe::topology::allowed_cpus() == just, "allowed_cpus() lists CPUs outside the binding");
    const auto p = moe::topology::placement_for_path(moe::test::source_dir() + "/CMakeLists.txt");
    check(p.cpus == just, "the I/O threads' CPUs lie outside the binding");
    moe::ThreadPool pool(2);
    std::vector<std::vector<int>> worker_cpus(2);
    pool.on_each_worker([&](int64_t, int32_t w) { worker_cpus[size_t(w)] = affinity_of_this_thread(); });
    for (const auto &cpus : worker_cpus) check(cpus == just, "a compute thread is pinned outside the binding");
    return bad;
}

// The core count, the allowed CPUs, the I/O threads' CPUs and the compute
// threads' pinning must all stay within the CPUs the process may run on.
// Run in a fresh process, as the topology is loaded once per process.
TEST(Topology, EverythingStaysWithinTheProcessCpuBinding) {
    const std::vector<int> initial = affinity_of_this_thread();
    if (initial.size() < 2) GTEST_SKIP() << "needs two CPUs to leave one out";
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(initial.front(), &set);
            if (sched_setaffinity(0, sizeof set, &set) != 0) std::_Exit(100);
            std::_Exit(checks_within_binding(initial.front()));
        },
        ::testing::ExitedWithCode(0), "");
}

TEST(DevicePlacement, CpuListText) {
    EXPECT_EQ(moe::topology::cpu_list_text({}), "");
    EXPECT_EQ(moe::topology::cpu_list_text({3}), "3");
    EXPECT_EQ(moe::topology::cpu_list_text({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
}

TEST(NumaBuffer, AllocatesZeroedWritableMemory) {
    for (auto placement : {moe::NumaPlacement::local, moe::NumaPlacement::interleave}) {
        moe::NumaBuffer buf(5u << 20, placement);
        ASSERT_NE(buf.data(), nullptr);
        EXPECT_EQ(buf.size(), 5u << 20);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(buf.data()) % 4096, 0u);
        auto *p = static_cast<unsigned char *>(buf.data());
        EXPECT_EQ(p[0], 0);
        EXPECT_EQ(p[buf.size() - 1], 0);
        std::memset(p, 0xab, buf.size());
        moe::NumaBuffer moved = std::move(buf);
        EXPECT_EQ(buf.data(), nullptr);
        EXPECT_EQ(static_cast<unsigned char *>(moved.data())[12345], 0xab);
    }
    moe::NumaBuffer small(100, moe::NumaPlacement::node, 0);
    EXPECT_NE(small.data(), nullptr);
    EXPECT_THROW(moe::NumaBuffer(4096, moe::NumaPlacement::node, 100000), std::exception);
}

// The policy asked for is the one the kernel holds for the range (applied on
// one-node machines too, where it changes nothing but can be read back).
TEST(NumaBuffer, PlacementIsTheKernelsPolicyForTheRange) {
    if (!moe::numa_supported()) GTEST_SKIP() << "no NUMA support here";
    auto policy_of = [](void *p) {
        int mode = -1;
        unsigned long nodes[16] = {};
        EXPECT_EQ(get_mempolicy(&mode, nodes, sizeof nodes * 8, p, MPOL_F_ADDR), 0) << std::strerror(errno);
        return mode;
    };
    moe::NumaBuffer local(4u << 20, moe::NumaPlacement::local);
    ASSERT_TRUE(local.numa_placed());
    EXPECT_EQ(policy_of(local.data()), MPOL_PREFERRED);
    EXPECT_EQ(local.placement().rfind("node ", 0), 0u) << local.placement();

    moe::NumaBuffer spread(4u << 20, moe::NumaPlacement::interleave);
    ASSERT_TRUE(spread.numa_placed());
    EXPECT_EQ(policy_of(spread.data()), MPOL_INTERLEAVE);
    EXPECT_EQ(spread.placement().rfind("interleaved over ", 0), 0u) << spread.placement();
    if (spread.huge_pages_requested()) EXPECT_NE(spread.placement().find("huge pages"), std::string::npos);

    // Moving keeps the description with the memory.
    const std::string text = spread.placement();
    moe::NumaBuffer moved = std::move(spread);
    EXPECT_EQ(moved.placement(), text);
}

}  // namespace

namespace {

int range_policy(void *p) {
    int mode = -1;
    unsigned long nodes[16] = {};
    EXPECT_EQ(get_mempolicy(&mode, nodes, sizeof nodes * 8, p, MPOL_F_ADDR), 0) << std::strerror(errno);
    return mode;
}

// The calling thread's memory policy until the end of the scope.
struct ScopedMemPolicy {
    explicit ScopedMemPolicy(int mode) {
        unsigned long node0 = 1;
        ok = set_mempolicy(mode, &node0, sizeof node0 * 8) == 0;
    }
    ~ScopedMemPolicy() { set_mempolicy(MPOL_DEFAULT, nullptr, 0); }
    bool ok;
};

// A process started with `numactl --membind=N` or `--interleave=...` (or
// given a policy by the application) says where its memory goes: the local
// placement, the default, keeps that policy for the buffer rather than
// preferring the node of the thread's CPU, and interleaving stays within the
// nodes a binding allows.
TEST(NumaBuffer, APolicyTheProcessWasGivenIsKept) {
    if (!moe::numa_supported()) GTEST_SKIP() << "no NUMA support here";
    for (int mode : {MPOL_BIND, MPOL_INTERLEAVE, MPOL_PREFERRED}) {
        std::optional<moe::NumaBuffer> buf;
        {
            const ScopedMemPolicy given(mode);
            ASSERT_TRUE(given.ok) << std::strerror(errno);
            buf.emplace(4u << 20, moe::NumaPlacement::local);
        }
        EXPECT_EQ(range_policy(buf->data()), mode) << buf->placement();
        EXPECT_NE(buf->placement().find("process"), std::string::npos) << buf->placement();
    }
    std::optional<moe::NumaBuffer> spread;
    {
        const ScopedMemPolicy given(MPOL_BIND);
        ASSERT_TRUE(given.ok);
        spread.emplace(4u << 20, moe::NumaPlacement::interleave);
    }
    EXPECT_EQ(range_policy(spread->data()), MPOL_INTERLEAVE);
    int mode = -1;
    unsigned long nodes[16] = {};
    ASSERT_EQ(get_mempolicy(&mode, nodes, sizeof nodes * 8, spread->data(), MPOL_F_ADDR), 0);
    EXPECT_EQ(nodes[0], 1u) << "interleaved beyond the nodes the binding allows";
    for (size_t i = 1; i < 16; ++i) EXPECT_EQ(nodes[i], 0u);
}

}  // namespace
