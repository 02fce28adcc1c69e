// Memory bandwidth probe: streaming read of a buffer far larger than the
// last-level cache, with 1 and 2 threads. The kernels' GB/s are compared
// against this figure (docs/performance.md).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "cli/stream_sum.hpp"
#include "common/numa_memory.hpp"
#include "common/thread_pool.hpp"

namespace {

constexpr size_t kBytes = size_t{1} << 30;  // 1 GiB
constexpr int64_t kChunk = 1 << 20;         // bytes per task

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
            sink[static_cast<size_t>(worker)] += cli::stream_sum(p, kChunk / 8, avx2);
        });
        benchmark::ClobberMemory();
    }
    benchmark::DoNotOptimize(sink.data());
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kBytes));
}
BENCHMARK(BM_StreamRead)->Arg(1)->Arg(2)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
