#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include <filesystem>
#include <fstream>

#include "common/cgroup_memory.hpp"
#include "common/error.hpp"
#include "experts/budget_planner.hpp"
#include "experts/io_mode_choice.hpp"
#include "support/paths.hpp"
#include "model/hparams.hpp"

using moe::IoModeRequest;
using moe::choose_io_mode;

namespace {
constexpr uint64_t GiB = 1ull << 30, MiB = 1ull << 20;

IoModeRequest model(uint64_t dense, uint64_t experts, uint64_t budget) {
    IoModeRequest r;
    r.model_bytes = dense + experts + 4 * MiB;  // header and padding
    r.dense_bytes = dense;
    r.expert_bytes = experts;
    r.memory_budget = budget;
    r.overhead_bytes = 256 * MiB;
    return r;
}
bool contains(const std::string &s, const char *part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST(IoModeChoice, SmallModelIsMapped) {
    const auto c = choose_io_mode(model(1 * GiB, 3 * GiB, 8 * GiB));
    EXPECT_EQ(c.mode, MOESTREAM_IO_MMAP);
    EXPECT_EQ(c.budget, 8 * GiB);
    EXPECT_FALSE(c.budget_too_small);
    EXPECT_TRUE(contains(c.reason, "fits budget 8.0 GiB: mmap")) << c.reason;
}

TEST(IoModeChoice, OverheadDecidesTheBorder) {
    IoModeRequest r = model(1 * GiB, 3 * GiB, 0);
    r.memory_budget = r.model_bytes + r.overhead_bytes;
    EXPECT_EQ(choose_io_mode(r).mode, MOESTREAM_IO_MMAP);
    r.memory_budget -= 1;
    EXPECT_EQ(choose_io_mode(r).mode, MOESTREAM_IO_DIRECT);
}

TEST(IoModeChoice, LargeModelStreamsIntoTheRemainingBudget) {
    const auto c = choose_io_mode(model(2 * GiB, 16 * GiB, 8 * GiB));
    EXPECT_EQ(c.mode, MOESTREAM_IO_DIRECT);
    EXPECT_EQ(c.expert_cache_bytes, 8 * GiB - 2 * GiB - 256 * MiB);
    EXPECT_FALSE(c.budget_too_small);
    EXPECT_TRUE(contains(c.reason, "> budget 8.0 GiB: direct I/O into a 5.8 GiB expert cache")) << c.reason;
    EXPECT_LT(c.reason.size(), sizeof(moestream_model_info{}.io_mode_reason));
}

TEST(IoModeChoice, FallsBackToPreadWithoutODirect) {
    IoModeRequest r = model(2 * GiB, 16 * GiB, 8 * GiB);
    r.direct_io_available = false;
    const auto c = choose_io_mode(r);
    EXPECT_EQ(c.mode, MOESTREAM_IO_PREAD);
    EXPECT_TRUE(contains(c.reason, "pread")) << c.reason;
}

TEST(IoModeChoice, DenseLargerThanBudgetIsReported) {
    const auto c = choose_io_mode(model(9 * GiB, 100 * GiB, 8 * GiB));
    EXPECT_EQ(c.mode, MOESTREAM_IO_DIRECT);
    EXPECT_TRUE(c.budget_too_small);
    EXPECT_EQ(c.expert_cache_bytes, 0u);
    EXPECT_TRUE(contains(c.reason, "too small")) << c.reason;
    EXPECT_TRUE(contains(c.reason, "9.0 GiB")) << c.reason;
}

TEST(IoModeChoice, ExpertCacheNeverExceedsTheExperts) {
    IoModeRequest r = model(1 * GiB, 2 * GiB, 100 * GiB);
    r.requested = MOESTREAM_IO_DIRECT;
    EXPECT_EQ(choose_io_mode(r).expert_cache_bytes, 2 * GiB);
}

TEST(IoModeChoice, RequestedModesWin) {
    IoModeRequest r = model(2 * GiB, 16 * GiB, 8 * GiB);
    r.requested = MOESTREAM_IO_MMAP;
    auto c = choose_io_mode(r);
    EXPECT_EQ(c.mode, MOESTREAM_IO_MMAP);
    EXPECT_TRUE(contains(c.reason, "requested by io_mode=mmap")) << c.reason;
    r = model(1 * GiB, 1 * GiB, 8 * GiB);
    r.requested = MOESTREAM_IO_PREAD;
    EXPECT_EQ(choose_io_mode(r).mode, MOESTREAM_IO_PREAD);
    r.requested = MOESTREAM_IO_DIRECT;
    r.direct_io_available = false;
    c = choose_io_mode(r);
    EXPECT_EQ(c.mode, MOESTREAM_IO_PREAD);
    EXPECT_TRUE(contains(c.reason, "O_DIRECT is unavailable")) << c.reason;
}

TEST(IoModeChoice, EnvironmentOverridesParams) {
    IoModeRequest r = model(1 * GiB, 1 * GiB, 8 * GiB);
    r.requested = MOESTREAM_IO_MMAP;
    r.env_mode = "direct";
    auto c = choose_io_mode(r);
    EXPECT_EQ(c.mode, MOESTREAM_IO_DIRECT);
    EXPECT_TRUE(contains(c.reason, "MOESTREAM_IO_MODE=direct")) << c.reason;
    r.env_mode = "auto";
    EXPECT_EQ(choose_io_mode(r).mode, MOESTREAM_IO_MMAP);
    r.env_mode = "bogus";
    try {
        choose_io_mode(r);
        FAIL();
    } catch (const moe::Error &e) {
        EXPECT_EQ(e.status(), moe::Status::invalid_argument);
        EXPECT_TRUE(contains(e.what(), "bogus"));
    }
    r.env_mode = {};
    r.requested = 17;
    EXPECT_THROW(choose_io_mode(r), moe::Error);
}

TEST(IoModeChoice, EnvironmentIsReadByTheEnvVariant) {
    IoModeRequest r = model(1 * GiB, 1 * GiB, 8 * GiB);
    ::setenv("MOESTREAM_IO_MODE", "pread", 1);
    EXPECT_EQ(moe::choose_io_mode_from_env(r).mode, MOESTREAM_IO_PREAD);
    ::unsetenv("MOESTREAM_IO_MODE");
    EXPECT_EQ(moe::choose_io_mode_from_env(r).mode, MOESTREAM_IO_MMAP);
}

TEST(IoModeChoice, AutomaticBudget) {
    // Available memory moves with other processes: check bounds, not equality.
    const uint64_t physical = uint64_t(::sysconf(_SC_PHYS_PAGES)) * uint64_t(::sysconf(_SC_PAGESIZE));
    const uint64_t b = moe::automatic_memory_budget();
    EXPECT_GT(b, 0u);
    EXPECT_LE(b, physical / 10 * 8);
    IoModeRequest r = model(1 * MiB, 1 * MiB, 0);
    const auto c = choose_io_mode(r);
    EXPECT_GT(c.budget, 0u);
    EXPECT_LE(c.budget, physical / 10 * 8);
    EXPECT_TRUE(contains(c.reason, "auto budget")) << c.reason;
}

TEST(IoModeChoice, ParsesMeminfo) {
    EXPECT_EQ(moe::parse_mem_available("MemTotal:  100 kB\nMemFree: 5 kB\nMemAvailable:    2048 kB\n"), 2048u * 1024);
    EXPECT_FALSE(moe::parse_mem_available("MemTotal: 100 kB\n").has_value());
    EXPECT_FALSE(moe::parse_mem_available("MemAvailable: x kB\n").has_value());
    EXPECT_FALSE(moe::parse_mem_available("MemAvailable: 99999999999999999999999 kB\n").has_value());
    EXPECT_FALSE(moe::parse_mem_available("").has_value());
}

TEST(IoModeChoice, NamesAndHumanBytes) {
    EXPECT_STREQ(moe::io_mode_name(MOESTREAM_IO_DIRECT), "direct");
    EXPECT_EQ(moe::io_mode_name(9), nullptr);
    EXPECT_EQ(moe::parse_io_mode("pread"), MOESTREAM_IO_PREAD);
    EXPECT_FALSE(moe::parse_io_mode("PREAD").has_value());
    EXPECT_EQ(moe::human_bytes(17), "17 B");
    EXPECT_EQ(moe::human_bytes(3 * 1024), "3.0 KiB");
    EXPECT_EQ(moe::human_bytes(18 * GiB + GiB / 5), "18.2 GiB");
    EXPECT_EQ(moe::human_bytes(~0ull), "16.0 EiB");
}

TEST(IoModeChoice, OverheadEstimateGrowsWithContext) {
    moe::HParams hp;
    hp.n_layer = 48;
    hp.n_ctx_train = 40960;
    hp.n_embd = 2048;
    hp.n_head = 32;
    hp.n_head_kv = 4;
    hp.head_dim_k = hp.head_dim_v = 128;
    hp.n_vocab = 151936;
    hp.n_expert_used = 8;
    hp.n_ff_expert = 768;
    const uint64_t kv4096 = 48ull * 4096 * 4 * 256 * 2;  // F16 K and V
    const uint64_t def = moe::estimate_runtime_overhead(hp, 0, 64);
    EXPECT_GT(def, kv4096);
    EXPECT_LT(def, kv4096 + 64 * MiB);
    EXPECT_GT(moe::estimate_runtime_overhead(hp, 8192, 64), def + kv4096 - 1);
    // A file that does not give its training length: a context opened with
    // n_ctx 0 has 4096 positions, and the estimate holds their KV cache.
    hp.n_ctx_train = 0;
    EXPECT_EQ(moe::estimate_runtime_overhead(hp, 0, 64), moe::estimate_runtime_overhead(hp, 4096, 64));
    EXPECT_EQ(moe::context_length(hp, 0), 4096);
}

// A v2 hierarchy written out by hand: the limit nearest the top can bind,
// droppable page cache counts as room, shared memory does not.
TEST(CgroupMemory, HeadroomIsTheLeastOverTheLevelsWithALimit) {
    namespace fs = std::filesystem;
    const fs::path root = fs::path(moe::test::scratch_dir()) / "cgroup-v2";
    fs::remove_all(root);
    auto level = [&](const std::string &rel, const char *max, uint64_t current, uint64_t file, uint64_t shmem) {
        fs::create_directories(root / rel);
        std::ofstream(root / rel / "memory.max") << max << "\n";
        std::ofstream(root / rel / "memory.current") << current << "\n";
        std::ofstream(root / rel / "memory.stat") << "anon 1\nfile " << file << "\nkernel 2\nshmem " << shmem << "\n";
    };
    const uint64_t G = 1ull << 30;
    level("box", "8589934592", 5 * G, 2 * G, 0);      // 8 GiB - (5 - 2) GiB = 5 GiB
    level("box/app", "max", 3 * G, 1 * G, 0);          // no limit of its own
    level("box/app/job", "17179869184", 4 * G, 0, 0);  // 16 GiB - 4 GiB = 12 GiB
    EXPECT_EQ(moe::cgroup_memory_headroom("/box/app/job", root.string()), 5 * G);
    level("box/app/job", "3221225472", 2 * G, 1 * G, 1 * G);  // 3 GiB - 2 GiB: shmem cannot be dropped
    EXPECT_EQ(moe::cgroup_memory_headroom("/box/app/job", root.string()), 1 * G);
    level("box", "1073741824", 2 * G, 0, 0);  // over its limit: no room, not a wrapped number
    EXPECT_EQ(moe::cgroup_memory_headroom("/box/app/job", root.string()), 0u);
    EXPECT_FALSE(moe::cgroup_memory_headroom("/box/app", (root / "missing").string()).has_value());
    EXPECT_FALSE(moe::cgroup_memory_headroom("", root.string()).has_value());

    std::ofstream(root / "self-cgroup") << "12:cpu:/legacy\n0::/box/app/job\n";
    EXPECT_EQ(moe::own_cgroup_v2_path((root / "self-cgroup").string()), "/box/app/job");
    std::ofstream(root / "v1-only") << "12:memory:/legacy\n";
    EXPECT_EQ(moe::own_cgroup_v2_path((root / "v1-only").string()), "");
    fs::remove_all(root);
}

TEST(CgroupMemory, V1HeadroomUsesTheHierarchicalLimit) {
    namespace fs = std::filesystem;
    const fs::path root = fs::path(moe::test::scratch_dir()) / "cgroup-v1";
    fs::remove_all(root);
    fs::create_directories(root / "job");
    const uint64_t G = 1ull << 30;
    auto write = [&](uint64_t limit, uint64_t usage, uint64_t cache, uint64_t shmem) {
        std::ofstream(root / "job" / "memory.usage_in_bytes") << usage << "\n";
        std::ofstream(root / "job" / "memory.stat") << "cache 5\nrss 7\nhierarchical_memory_limit " << limit
                                                    << "\ntotal_cache " << cache << "\ntotal_shmem " << shmem << "\n";
    };
    write(8 * G, 6 * G, 3 * G, 1 * G);  // 8 - (6 - (3 - 1)) = 4 GiB
    EXPECT_EQ(moe::cgroup_v1_memory_headroom("/job", root.string()), 4 * G);
    write(9223372036854771712ull, 6 * G, 0, 0);  // unlimited
    EXPECT_FALSE(moe::cgroup_v1_memory_headroom("/job", root.string()).has_value());
    std::ofstream(root / "self-cgroup") << "5:devices:/\n4:cpu,memory:/job\n0::/\n";
    EXPECT_EQ(moe::own_cgroup_v1_memory_path((root / "self-cgroup").string()), "/job");
    fs::remove_all(root);
}

// The automatic budget never exceeds what the process's own cgroup allows.
TEST(CgroupMemory, AutomaticBudgetStaysUnderTheCgroupHeadroom) {
    const auto room = moe::process_cgroup_memory_headroom();
    if (!room) GTEST_SKIP() << "no memory limit on this process's cgroup";
    EXPECT_LE(moe::automatic_memory_budget(), *room);
}
