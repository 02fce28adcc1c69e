// The memory promise: with a budget B the whole process stays within
// B + max(5% of B, 64 MiB) (docs/architecture.md, "Memory budget"). A model
// of a few hundred MiB is generated, then each I/O mode runs in a child
// process with a budget well under the model size; the child reports its peak
// resident set (VmHWM) and the engine's own accounting.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/context.hpp"
#include "support/paths.hpp"
#include "support/scoped_env.hpp"


namespace {

using namespace moe;

constexpr uint64_t MiB = 1ull << 20;

uint64_t peak_rss() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
    return 0;
}

struct ChildReport {
    int ok = 0;
    char error[256] = {};
    uint64_t peak_rss = 0;
    uint64_t peak_rss_after_open = 0;
    moestream_stats stats{};
};

// Runs in the forked child: open, 4-token prompt, 28 decode steps.
void measure(const std::string &model, int32_t io_mode, uint64_t budget, ChildReport &r) {
    try {
        ContextParams p;
        p.model_path = model;
        p.io_mode = io_mode;
        p.memory_budget = budget;
        p.n_ctx = 128;
        p.n_threads = 2;
        p.profile_disabled = true;
        Context ctx(p);
        r.peak_rss_after_open = peak_rss();
        std::vector<float> logits(size_t(ctx.n_vocab()));
        const int32_t prompt[4] = {1, 17, 33, 5};
        ctx.step(prompt, 4, logits.data());
        for (int i = 0; i < 28; ++i) {
            const int32_t next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
            ctx.step(&next, 1, logits.data());
        }
        ctx.fill_stats(r.stats);
        r.peak_rss = peak_rss();
        r.ok = 1;
    } catch (const std::exception &e) {
        std::snprintf(r.error, sizeof r.error, "%s", e.what());
    }
}

ChildReport run_in_child(const std::string &model, int32_t io_mode, uint64_t budget) {
    ChildReport r;
    int fds[2];
    if (::pipe(fds) != 0) {
        std::snprintf(r.error, sizeof r.error, "pipe failed");
        return r;
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(fds[0]);
        ChildReport c;
        measure(model, io_mode, budget, c);
        const char *p = reinterpret_cast<const char *>(&c);
        size_t left = sizeof c;
        while (left > 0) {
            const ssize_t n = ::write(fds[1], p, left);
            if (n <= 0) break;
            p += n;
            left -= size_t(n);
        }
        ::_exit(0);
    }
    ::close(fds[1]);
    char *p = reinterpret_cast<char *>(&r);
    size_t got = 0;
    while (got < sizeof r) {
        const ssize_t n = ::read(fds[0], p + got, sizeof r - got);
        if (n <= 0) break;
        got += size_t(n);
    }
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (got != sizeof r) {
        r = ChildReport{};
        std::snprintf(r.error, sizeof r.error, "child died (status %d)", status);
    }
    return r;
}

TEST(PeakRss, StreamingModesStayWithinTheBudgetPromise) {
#ifdef MOESTREAM_TEST_SANITIZED
    GTEST_SKIP() << "peak RSS is not meaningful under a sanitizer";
#endif
    const std::string cli = test::binary_dir() + "/moestream";
    if (!std::filesystem::exists(cli)) GTEST_SKIP() << "CLI not built";
    const std::string dir = test::scratch_dir();
    const std::string model = dir + "/model.gguf";
    // ~443 MiB: 4 layers of 32 experts (2048 x 768, Q4_K_M), dense ~60 MiB.
    ASSERT_EQ(test::run(cli + " generate --preset demo --layers 4 --experts 32 --top-k 4 --vocab 8192 --seed 3 -o " +
                        model + " > /dev/null 2>&1"),
              0);
    const uint64_t model_bytes = std::filesystem::file_size(model);
    const uint64_t budget = model_bytes * 45 / 100;
    const uint64_t allowance = std::max<uint64_t>(budget / 20, 64 * MiB);

    // mmap too: forced below the model size, it must release experts to keep
    // its promise.
    for (int32_t mode : {MOESTREAM_IO_DIRECT, MOESTREAM_IO_PREAD, MOESTREAM_IO_MMAP}) {
        const ChildReport r = run_in_child(model, mode, budget);
        const std::string what = mode == MOESTREAM_IO_DIRECT ? "direct" : mode == MOESTREAM_IO_PREAD ? "pread" : "mmap";
        ASSERT_TRUE(r.ok) << what << ": " << r.error;
        std::printf("%s: model %.1f MiB, budget %.1f MiB, peak RSS %.1f MiB (after open %.1f MiB), engine resident "
                    "%.1f MiB (dense %.1f, KV %.1f, expert cache %.1f), %s\n",
                    what.c_str(), double(model_bytes) / MiB, double(budget) / MiB, double(r.peak_rss) / MiB,
                    double(r.peak_rss_after_open) / MiB, double(r.stats.resident_bytes) / MiB,
                    double(r.stats.dense_bytes) / MiB, double(r.stats.kv_bytes) / MiB,
                    double(r.stats.expert_cache_bytes) / MiB, r.stats.io_mode_reason);
        EXPECT_GT(r.stats.cache_misses, 0u) << what;
        EXPECT_GT(r.stats.evictions, 0u) << what << ": the cache must be under pressure for the test to mean anything";
        EXPECT_GT(r.peak_rss, 0u) << what;
        EXPECT_LE(r.stats.resident_bytes, budget) << what;
        EXPECT_LE(r.peak_rss, budget + allowance)
            << what << ": peak RSS " << r.peak_rss / MiB << " MiB exceeds budget " << budget / MiB << " MiB + "
            << allowance / MiB << " MiB";
    }
    std::filesystem::remove_all(dir);
}

}  // namespace
