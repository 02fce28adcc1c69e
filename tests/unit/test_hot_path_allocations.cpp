// No allocation in the per-token hot path: from a context's first step on,
// steps and sampling allocate nothing on any thread (the caller, the compute
// workers, the I/O threads), in every I/O mode, also while the expert cache
// misses, evicts and reads ahead. This binary replaces malloc and friends
// with counting versions that forward to glibc's; sanitizer runtimes own
// malloc themselves, so there the test is skipped.
#include <dlfcn.h>
#include <execinfo.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/context.hpp"
#include "runtime/sampler.hpp"
#include "support/paths.hpp"
#include "support/scoped_env.hpp"


namespace {

std::atomic<bool> g_counting{false};
std::atomic<uint64_t> g_allocations{0};
std::atomic<void *> g_first_caller{nullptr};
std::atomic<size_t> g_first_size{0};

void *g_first_stack[24];
std::atomic<int> g_first_depth{0};

inline void note_allocation(size_t size, void *caller) {
    if (!g_counting.load(std::memory_order_relaxed)) return;
    if (g_allocations.fetch_add(1, std::memory_order_relaxed) == 0) {
        g_first_caller.store(caller, std::memory_order_relaxed);
        g_first_size.store(size, std::memory_order_relaxed);
        g_first_depth.store(backtrace(g_first_stack, 24), std::memory_order_relaxed);  // warmed up in SetUp
    }
}

}  // namespace

#ifndef MOESTREAM_TEST_SANITIZED
extern "C" {
void *__libc_malloc(size_t);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
void *__libc_memalign(size_t, size_t);

void *malloc(size_t size) {
    note_allocation(size, __builtin_return_address(0));
    return __libc_malloc(size);
}
void *calloc(size_t n, size_t size) {
    note_allocation(n * size, __builtin_return_address(0));
    return __libc_calloc(n, size);
}
void *realloc(void *p, size_t size) {
    note_allocation(size, __builtin_return_address(0));
    return __libc_realloc(p, size);
}
void *aligned_alloc(size_t alignment, size_t size) {
    note_allocation(size, __builtin_return_address(0));
    return __libc_memalign(alignment, size);
}
void *memalign(size_t alignment, size_t size) {
    note_allocation(size, __builtin_return_address(0));
    return __libc_memalign(alignment, size);
}
int posix_memalign(void **out, size_t alignment, size_t size) {
    note_allocation(size, __builtin_return_address(0));
    void *p = __libc_memalign(alignment, size);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
}  // extern "C"
#endif

namespace {

using namespace moe;

std::string cli() { return test::binary_dir() + "/moestream"; }


// The first allocation counted: its size and the call stack that made it.
std::string describe_first_allocation() {
    std::string out = std::to_string(g_first_size.load()) + " bytes, from:";
    for (int i = 1; i < g_first_depth.load(); ++i) {
        Dl_info info{};
        out += "\n  ";
        if (!::dladdr(g_first_stack[i], &info)) {
            out += "?";
        } else if (info.dli_sname) {
            out += info.dli_sname;
        } else {  // a local symbol: module and offset, for addr2line
            char offset[32];
            std::snprintf(offset, sizeof offset, "+0x%zx",
                          size_t(static_cast<char *>(g_first_stack[i]) - static_cast<char *>(info.dli_fbase)));
            out += std::string(info.dli_fname ? info.dli_fname : "?") + offset;
        }
    }
    return out;
}

class HotPathAllocations : public ::testing::Test {
protected:
    void SetUp() override {
#ifdef MOESTREAM_TEST_SANITIZED
        GTEST_SKIP() << "the sanitizer runtime owns malloc";
#endif
        void *warm[2];
        backtrace(warm, 2);  // its first call loads the unwinder, which allocates
        if (!std::filesystem::exists(cli())) GTEST_SKIP() << "CLI not built";
        dir_ = test::scratch_dir();
        model_ = dir_ + "/model.gguf";
        ASSERT_EQ(test::run(cli() + " generate --preset tiny --quant q4_k_m --layers 4 --experts 16 --top-k 4 --seed 3 -o " +
                            model_ + " > /dev/null 2>&1"),
                  0);
    }
    void TearDown() override {
        if (!dir_.empty()) std::filesystem::remove_all(dir_);
    }

    // Opens a context and counts every allocation from its first step on: a
    // prompt, then `decode` single-token steps, each followed by a draw.
    uint64_t allocations_in_steps(ContextParams p, int decode, const SamplerParams &sampling = SamplerParams{}) {
        p.model_path = model_;
        p.n_threads = 2;
        p.n_ctx = 128;
        p.profile_disabled = true;
        Context ctx(p);
        Sampler sampler(sampling);  // by default temperature, top-k, top-p and min-p all on
        std::vector<float> logits(size_t(ctx.n_vocab()));
        const int32_t prompt[6] = {1, 7, 3, 9, 4, 2};
        // Fed tokens vary the routing from step to step; the sampler draws as in generation.
        std::vector<int32_t> tokens(static_cast<size_t>(decode));
        for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 37 + 11) % size_t(ctx.n_vocab()));
        sampled_ += sampler.sample(logits);  // a sampler sizes its candidate list on its first draw
        g_allocations = 0;
        g_first_caller = nullptr;
        g_counting = true;
        ctx.step(prompt, 6, logits.data());
        sampler.accept(prompt);
        for (int i = 0; i < decode; ++i) {
            ctx.step(&tokens[size_t(i)], 1, logits.data());
            sampled_ += sampler.sample(logits);
        }
        g_counting = false;
        moestream_stats stats{};
        ctx.fill_stats(stats);
        misses_ = stats.cache_misses;
        return g_allocations.load();
    }

    std::string dir_, model_;
    uint64_t misses_ = 0;
    int64_t sampled_ = 0;  // keeps the draws observable
};

TEST_F(HotPathAllocations, MappedDecodeAllocatesNothing) {
    ContextParams p;
    p.io_mode = MOESTREAM_IO_MMAP;
    EXPECT_EQ(allocations_in_steps(p, 24), 0u) << describe_first_allocation();
}

TEST_F(HotPathAllocations, PenalisedSamplingAllocatesNothing) {
    // The history ring is allocated with the sampler, the penalised row and
    // the count table on its first draw; the window wraps during the steps.
    ContextParams p;
    p.io_mode = MOESTREAM_IO_MMAP;
    SamplerParams penalised;
    penalised.repeat_penalty = 1.3f;
    penalised.presence_penalty = 0.2f;
    penalised.frequency_penalty = 0.1f;
    penalised.penalty_last_n = 8;
    EXPECT_EQ(allocations_in_steps(p, 24, penalised), 0u) << describe_first_allocation();
    // The whole history as the window, with penalties favouring seen tokens:
    // its ring, of the largest window, is allocated with the sampler too.
    penalised.presence_penalty = -0.2f;
    penalised.frequency_penalty = -0.1f;
    penalised.penalty_last_n = kPenaltyWholeHistory;
    EXPECT_EQ(allocations_in_steps(p, 24, penalised), 0u) << describe_first_allocation();
}

TEST_F(HotPathAllocations, StreamedDecodeThroughMissesAndReadAheadAllocatesNothing) {
    // A cache of a few experts: every step misses, evicts and reads ahead.
    test::ScopedEnv slots("MOESTREAM_CACHE_SLOTS", "12");
    for (int32_t mode : {MOESTREAM_IO_DIRECT, MOESTREAM_IO_PREAD}) {
        ContextParams p;
        p.io_mode = mode;
        p.prefetch = MOESTREAM_PREFETCH_BOTH;
        EXPECT_EQ(allocations_in_steps(p, 24), 0u) << "io mode " << mode << ": " << describe_first_allocation();
        EXPECT_GT(misses_, 0u) << "io mode " << mode << ": the cache was meant to miss";
    }
}

}  // namespace
