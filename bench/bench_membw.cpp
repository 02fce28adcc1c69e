// Memory bandwidth probe: streaming read of a buffer far larger than the
// last-level cache, with 1 and 2 threads. The kernels' GB/s are compared
// against this figure (docs/performance.md).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/numa_memory.hpp"
#include "runtime/thread_pool.hpp"

namespace {

constexpr size_t kBytes = size_t{1} << 30;  // 1 GiB
constexpr int64_t kChunk = 1 << 20;         // bytes per task

// A plain summing loop; the compiler vectorises it for the target below.
__attribute__((target("avx2"))) uint64_t sum_avx2(const uint64_t *p, size_t n) {
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i < n; i += 4) {
        s0 += p[i];
        s1 += p[i + 1];
        s2 += p[i + 2];
        s3 += p[i + 3];
    }
    return s0 ^ s1 ^ s2 ^ s3;
}
uint64_t sum_baseline(const uint64_t *p, size_t n) {
    uint64_t s0 = 0, s1 = 0;
    for (size_t i = 0; i < n; i += 2) {
        s0 += p[i];
        s1 += p[i + 1];
    }
    return s0 ^ s1;
}

moe::NumaBuffer &buffer() {
    static moe::NumaBuffer buf = [] {
        moe::NumaBuffer b(kBytes, moe::NumaPlacement::local);
        std::memset(b.data(), 1, kBytes);  // fault every page in
        return b;
    }();
    return buf;
}

void BM_StreamRead(benchmark::State &state) {
    const int32_t threads = static_cast<int32_t>(state.range(0));
    moe::ThreadPool pool(threads);
    const auto *base = static_cast<const uint8_t *>(buffer().data());
    const bool avx2 = __builtin_cpu_supports("avx2");
    std::vector<uint64_t> sink(static_cast<size_t>(threads), 0);
    for (auto _ : state) {
        pool.parallel_for(static_cast<int64_t>(kBytes / kChunk), [&](int64_t task, int32_t worker) {
            const auto *p = reinterpret_cast<const uint64_t *>(base + task * kChunk);
            sink[static_cast<size_t>(worker)] += avx2 ? sum_avx2(p, kChunk / 8) : sum_baseline(p, kChunk / 8);
        });
        benchmark::ClobberMemory();
    }
    benchmark::DoNotOptimize(sink.data());
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kBytes));
}
BENCHMARK(BM_StreamRead)->Arg(1)->Arg(2)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
