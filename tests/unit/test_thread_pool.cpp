#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "common/thread_pool.hpp"
#include "common/topology.hpp"
#include "support/thread_limit.hpp"

namespace {

TEST(ThreadPool, EveryTaskRunsExactlyOnceForAllSizes) {
    for (int32_t threads : {1, 2, 3, 4}) {
        moe::ThreadPool pool(threads);
        ASSERT_EQ(pool.size(), threads);
        for (int64_t n : {0, 1, 2, 3, 7, 64, 1000}) {
            std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
            std::atomic<int> bad_worker{0};
            pool.parallel_for(n, [&](int64_t task, int32_t worker) {
                hits[static_cast<size_t>(task)].fetch_add(1, std::memory_order_relaxed);
                if (worker < 0 || worker >= threads) bad_worker.fetch_add(1);
            });
            for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " threads, n " << n;
            EXPECT_EQ(bad_worker.load(), 0);
        }
    }
}

TEST(ThreadPool, ManyRepeatedCallsSeeTheirOwnJob) {
    moe::ThreadPool pool(3);
    std::vector<int64_t> sums(4, 0);
    for (int call = 0; call < 20000; ++call) {
        std::atomic<int64_t> sum{0};
        const int64_t n = 1 + call % 9;
        pool.parallel_for(n, [&, call](int64_t task, int32_t) { sum.fetch_add(task + call, std::memory_order_relaxed); });
        ASSERT_EQ(sum.load(), n * (n - 1) / 2 + n * call) << "call " << call;
    }
}

TEST(ThreadPool, WorkerIndicesAllowPerWorkerScratch) {
    moe::ThreadPool pool(4);
    std::vector<int64_t> per_worker(static_cast<size_t>(pool.size()), 0);  // no atomics: one writer each
    pool.parallel_for(10000, [&](int64_t task, int32_t worker) { per_worker[static_cast<size_t>(worker)] += task; });
    int64_t total = 0;
    for (int64_t v : per_worker) total += v;
    EXPECT_EQ(total, int64_t{10000} * 9999 / 2);
}

TEST(ThreadPool, ExceptionsReachTheCallerAndThePoolStaysUsable) {
    moe::ThreadPool pool(3);
    EXPECT_THROW(pool.parallel_for(100,
                                   [](int64_t task, int32_t) {
                                       if (task == 37) throw std::runtime_error("task 37");
                                   }),
                 std::runtime_error);
    std::atomic<int> count{0};
    pool.parallel_for(50, [&](int64_t, int32_t) { count.fetch_add(1); });
    EXPECT_EQ(count.load(), 50);
}

// Task 0 opens the caller's own slice and does not return until every other
// task has run, so the rest of that slice can only finish if the other
// workers take it over.
TEST(ThreadPool, AStalledWorkersSliceIsTakenOverByTheOthers) {
    for (int32_t threads : {2, 3, 4}) {
        moe::ThreadPool pool(threads);
        const int64_t n = 64;
        std::atomic<int64_t> done{0};
        std::atomic<bool> gave_up{false};
        pool.parallel_for(n, [&](int64_t task, int32_t) {
            if (task == 0) {
                const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
                while (done.load() < n - 1)
                    if (std::chrono::steady_clock::now() > deadline) {
                        gave_up.store(true);
                        break;
                    }
            }
            done.fetch_add(1);
        });
        EXPECT_FALSE(gave_up.load()) << threads << " threads: tasks of the stalled slice were never run";
        EXPECT_EQ(done.load(), n);
    }
}

// Whether the pool's second worker went to sleep during a pause of `gap`
// between two parallel_for calls, inside a step or not. A worker that the
// machine deschedules for the whole pause cannot show either behaviour, so
// each is tried a few times.
bool worker_slept_during_pause(moe::ThreadPool &pool, bool in_step, std::chrono::microseconds gap) {
    std::optional<moe::ThreadPool::StepScope> step;
    if (in_step) step.emplace(pool);
    std::atomic<int> ran{0};
    pool.parallel_for(8, [&](int64_t, int32_t) { ran.fetch_add(1); });
    // A worker asleep before that call was counted when it fell asleep; from
    // here on it spins, and only a new sleep counts.
    const uint64_t before = pool.sleeps();
    std::this_thread::sleep_for(gap);
    const uint64_t after = pool.sleeps();
    pool.parallel_for(8, [&](int64_t, int32_t) { ran.fetch_add(1); });
    EXPECT_EQ(ran.load(), 16);
    return after > before;
}

TEST(ThreadPool, WithAStepSpinIdleWorkersStayAwakeInStepsAndSleepOtherwise) {
    if (moe::topology::allowed_cpus().size() < 2 || std::getenv("MOESTREAM_SPIN_US") ||
        std::getenv("MOESTREAM_STEP_SPIN_US"))
        GTEST_SKIP() << "the pool does not spin on one CPU or with MOESTREAM_SPIN_US / MOESTREAM_STEP_SPIN_US set";
    ::setenv("MOESTREAM_STEP_SPIN_US", "5000", 1);
    moe::ThreadPool pool(2);  // reads the variable once, here
    ::unsetenv("MOESTREAM_STEP_SPIN_US");
    // 600 us is three times the short spin (200 us) and far below the step's limit (5 ms).
    bool awake_in_step = false, asleep_outside = false;
    for (int attempt = 0; attempt < 10 && !awake_in_step; ++attempt)
        awake_in_step = !worker_slept_during_pause(pool, true, std::chrono::microseconds(600));
    // After the step (closed inside the helper) the workers sleep again.
    for (int attempt = 0; attempt < 10 && !asleep_outside; ++attempt)
        asleep_outside = worker_slept_during_pause(pool, false, std::chrono::milliseconds(30));
    EXPECT_TRUE(awake_in_step) << "the worker slept during every 600 us pause inside a step";
    EXPECT_TRUE(asleep_outside) << "the worker never slept during a 30 ms pause outside a step";
}

TEST(ThreadPool, ByDefaultStepsKeepTheShortSpin) {
    if (moe::topology::allowed_cpus().size() < 2 || std::getenv("MOESTREAM_SPIN_US") ||
        std::getenv("MOESTREAM_STEP_SPIN_US"))
        GTEST_SKIP() << "the pool does not spin on one CPU or with MOESTREAM_SPIN_US / MOESTREAM_STEP_SPIN_US set";
    moe::ThreadPool pool(2);
    bool asleep_in_step = false;
    for (int attempt = 0; attempt < 10 && !asleep_in_step; ++attempt)
        asleep_in_step = worker_slept_during_pause(pool, true, std::chrono::milliseconds(2));
    EXPECT_TRUE(asleep_in_step) << "by default the worker stayed awake through a 2 ms pause in a step";
}

// A spin longer than int64 nanoseconds hold is as good as forever: it must
// not wrap around to a negative time, which would turn spinning off.
TEST(ThreadPool, AHugeSpinTimeSpinsInsteadOfWrappingAround) {
    if (moe::topology::allowed_cpus().size() < 2 || std::getenv("MOESTREAM_SPIN_US") ||
        std::getenv("MOESTREAM_STEP_SPIN_US"))
        GTEST_SKIP() << "the pool does not spin on one CPU or with MOESTREAM_SPIN_US / MOESTREAM_STEP_SPIN_US set";
    std::optional<moe::ThreadPool> pool;
    {
        const moe::test::ScopedEnv spin("MOESTREAM_SPIN_US", "18446744073709551");  // x 1000 = 2^64 - 616
        pool.emplace(2);
    }
    bool awake = false;
    for (int attempt = 0; attempt < 10 && !awake; ++attempt)
        awake = !worker_slept_during_pause(*pool, false, std::chrono::milliseconds(2));
    EXPECT_TRUE(awake) << "the worker slept during every 2 ms pause";
}

// A pool with more threads than the CPUs the process may run on does not
// spin (a spinning worker would hold the CPU the others need), also when the
// machine has more CPUs than that: with a step spin of 5 s, the worker still
// goes to sleep during a pause in a step. Run in a fresh process bound to one
// CPU, as the topology is read once per process.
int pool_bound_to_one_cpu_sleeps() {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(sched_getcpu() >= 0 ? sched_getcpu() : 0, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) return 100;
    ::setenv("MOESTREAM_STEP_SPIN_US", "5000000", 1);
    moe::ThreadPool pool(2);
    bool slept = false;
    for (int attempt = 0; attempt < 10 && !slept; ++attempt)
        slept = worker_slept_during_pause(pool, true, std::chrono::milliseconds(50));
    return slept ? 0 : 1;
}

TEST(ThreadPool, MoreThreadsThanTheAllowedCpusDoNotSpin) {
    if (std::getenv("MOESTREAM_SPIN_US") || std::getenv("MOESTREAM_STEP_SPIN_US"))
        GTEST_SKIP() << "MOESTREAM_SPIN_US or MOESTREAM_STEP_SPIN_US is set";
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(std::_Exit(pool_bound_to_one_cpu_sleeps()), ::testing::ExitedWithCode(0), "");
}

// Per-thread set-up: every worker runs its own task, on its own thread, even
// when the others are asleep and would otherwise take it over.
TEST(ThreadPool, OnEachWorkerRunsOnceOnEveryThread) {
    for (int32_t threads : {1, 2, 4}) {
        moe::ThreadPool pool(threads);
        for (int round = 0; round < 3; ++round) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));  // past the spin: workers asleep
            std::vector<std::thread::id> ran_on(static_cast<size_t>(threads));
            std::vector<std::atomic<int>> runs(static_cast<size_t>(threads));
            pool.on_each_worker([&](int64_t task, int32_t worker) {
                ASSERT_EQ(task, worker);
                ran_on[size_t(worker)] = std::this_thread::get_id();
                runs[size_t(worker)].fetch_add(1);
            });
            EXPECT_EQ(ran_on[0], std::this_thread::get_id());
            for (int32_t w = 0; w < threads; ++w) {
                EXPECT_EQ(runs[size_t(w)].load(), 1) << threads << " threads, worker " << w;
                for (int32_t v = 0; v < w; ++v) EXPECT_NE(ran_on[size_t(v)], ran_on[size_t(w)]);
            }
        }
        // A throwing worker reaches the caller, and the pool stays usable.
        EXPECT_THROW(pool.on_each_worker([](int64_t, int32_t worker) {
            if (worker == 0) throw std::runtime_error("set-up failed");
        }),
                     std::runtime_error);
        std::atomic<int> tasks{0};
        pool.parallel_for(100, [&](int64_t, int32_t) { tasks.fetch_add(1); });
        EXPECT_EQ(tasks.load(), 100);
    }
}

// Threads that cannot start (a pids limit, no room for a stack) are a
// resource the process lacks, not a bug of the library: out_of_memory, as
// docs/errors.md says, and the threads started are stopped.
TEST(ThreadPool, ThreadsThatCannotStartAreOutOfMemory) {
    if (!moe::test::thread_limits_work()) GTEST_SKIP() << "an address-space limit cannot be set under a sanitizer";
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(std::_Exit(moe::test::exit_code_when_threads_cannot_start([] { moe::ThreadPool pool(8); })),
                ::testing::ExitedWithCode(0), "");
}

std::vector<int> cpus_of_this_thread() {
    cpu_set_t set;
    CPU_ZERO(&set);
    std::vector<int> out;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE; ++c)
            if (CPU_ISSET(c, &set)) out.push_back(c);
    return out;
}

// The CPUs the pool's workers 1.. are bound to.
std::vector<std::vector<int>> worker_cpus(moe::ThreadPool &pool) {
    std::vector<std::vector<int>> cpus(size_t(pool.size()));
    pool.on_each_worker([&](int64_t, int32_t w) { cpus[size_t(w)] = cpus_of_this_thread(); });
    cpus.erase(cpus.begin());
    return cpus;
}

// Two contexts stepped from two threads, each with half the cores: their
// pools' workers go to different cores instead of sharing the first ones.
TEST(ThreadPool, PoolsAliveTogetherPinTheirWorkersToDifferentCores) {
    const char *no_pin = std::getenv("MOESTREAM_NO_PIN");
    if ((no_pin && *no_pin && *no_pin != '0') || moe::topology::physical_cores() < 2)
        GTEST_SKIP() << "pinning is off, or fewer than two cores";
    const int32_t half = moe::topology::physical_cores() / 2 + 1;  // each pool's caller is not pinned
    moe::ThreadPool a(half), b(half);
    const auto in_a = worker_cpus(a), in_b = worker_cpus(b);
    for (const auto &cpus : in_a)
        if (cpus.size() != 1) GTEST_SKIP() << "workers are not pinned here";
    for (const auto &x : in_a)
        for (const auto &y : in_b) EXPECT_NE(x, y) << "two pools' workers share CPU " << x.front();
}

TEST(ThreadPool, DefaultSizeIsAtLeastOne) {
    moe::ThreadPool pool(0);
    EXPECT_GE(pool.size(), 1);
    EXPECT_THROW(moe::ThreadPool(-1), std::exception);
}

}  // namespace
