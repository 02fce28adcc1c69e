// Kernel throughput per weight type and ISA, in GB/s of weight bytes read:
//  - matvec/<type>/<isa>/<threads>: one token over a weight matrix far larger
//    than the last-level cache (comparable with bench_membw), 1 and 2 threads;
//  - matmat/<type>/<isa>/<tokens>: matmat_rows over the same matrix, one
//    thread; weight bytes are counted once (each row is read once for all
//    tokens), and the tokens/s counter gives the token rate;
//  - matvec_l2/<type>/<isa>: one token over a 512 KiB matrix that stays in
//    L2, in one call, the compute ceiling of the kernel without memory stalls;
//  - matmat_l2/<type>/<isa>/<tokens>: matmat_rows with 4 or 8 tokens over the
//    same 512 KiB matrix in one call (the multi-token compute ceiling);
//  - matvec_short/<type>/<isa> and matmat_short/<type>/<isa>/4: K-quant rows
//    of 768 elements (three super-blocks: the expert down projection of the
//    Qwen3-30B-A3B shape), one thread, 256 MiB, tasks of 256 rows.
#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/numa_memory.hpp"
#include "common/thread_pool.hpp"
#include "kernels/kernels.hpp"

namespace {

namespace k = moe::kernels;
using moe::GgmlType;

constexpr size_t kWeightBytes = size_t{256} << 20;  // 256 MiB of weights
constexpr size_t kCachedBytes = size_t{512} << 10;  // stays in L2
constexpr int64_t kRowElems = 4096;
constexpr int64_t kShortRowElems = 768;
constexpr int64_t kRowsPerTask = 32;

struct Matrix {
    GgmlType type;
    size_t bytes = 0;
    int64_t row_elems = 0;
    moe::NumaBuffer data;
    int64_t rows = 0;
    size_t row_bytes = 0;
};

void put_scale(uint8_t *p, std::mt19937 &rng) {
    std::uniform_real_distribution<float> d(0.001f, 0.01f);
    const uint16_t h = k::f32_to_fp16(d(rng));
    std::memcpy(p, &h, 2);
}

// Random quants with sane fp16 scale fields (no NaN/Inf/subnormal slowdowns).
void fill_block(GgmlType t, uint8_t *b, size_t bytes, std::mt19937 &rng) {
    for (size_t i = 0; i < bytes; ++i) b[i] = static_cast<uint8_t>(rng());
    switch (t) {
    case GgmlType::Q4_0: case GgmlType::Q5_0: case GgmlType::Q8_0: case GgmlType::IQ4_NL: case GgmlType::IQ4_XS:
        put_scale(b, rng);
        break;
    case GgmlType::Q2_K:
        put_scale(b + 80, rng);
        put_scale(b + 82, rng);
        break;
    case GgmlType::Q3_K: put_scale(b + 108, rng); break;
    case GgmlType::Q4_1: case GgmlType::Q5_1: case GgmlType::Q4_K: case GgmlType::Q5_K:
        put_scale(b, rng);
        put_scale(b + 2, rng);
        break;
    case GgmlType::Q6_K: put_scale(b + 208, rng); break;
    case GgmlType::MXFP4: b[0] = static_cast<uint8_t>(118 + rng() % 8); break;  // scales 2^-10 .. 2^-3
    default: break;
    }
}

// One matrix at a time (benchmarks are registered grouped by type).
Matrix &matrix(GgmlType t, size_t bytes, int64_t row_elems) {
    static std::unique_ptr<Matrix> current;
    if (current && current->type == t && current->bytes == bytes && current->row_elems == row_elems) return *current;
    current.reset();
    auto m = std::make_unique<Matrix>();
    m->type = t;
    m->bytes = bytes;
    m->row_elems = row_elems;
    m->row_bytes = moe::row_bytes(t, row_elems);
    m->rows = static_cast<int64_t>(bytes / m->row_bytes);
    m->data = moe::NumaBuffer(static_cast<size_t>(m->rows) * m->row_bytes, moe::NumaPlacement::local);
    std::mt19937 rng(42);
    auto *p = static_cast<uint8_t *>(m->data.data());
    const auto &tr = moe::type_traits(t);
    if (tr.block_elems == 1) {
        // Float rows: small normal values, converted.
        std::normal_distribution<float> nd(0.0f, 0.05f);
        const int64_t n = static_cast<int64_t>(m->data.size() / tr.block_bytes);
        for (int64_t i = 0; i < n; ++i) {
            const float v = nd(rng);
            if (t == GgmlType::F32) std::memcpy(p + 4 * i, &v, 4);
            else {
                const uint16_t h = t == GgmlType::F16 ? k::f32_to_fp16(v) : k::f32_to_bf16(v);
                std::memcpy(p + 2 * i, &h, 2);
            }
        }
    } else {
        for (size_t off = 0; off + tr.block_bytes <= m->data.size(); off += tr.block_bytes)
            fill_block(t, p + off, tr.block_bytes, rng);
    }
    current = std::move(m);
    return *current;
}

// n_tokens prepared activation rows of normally distributed values.
std::vector<uint8_t> activations(GgmlType t, int32_t n_tokens, int64_t row_elems) {
    std::vector<float> x(static_cast<size_t>(row_elems));
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const size_t ab = k::act_row_bytes(t, row_elems, false);
    std::vector<uint8_t> act(ab * static_cast<size_t>(n_tokens));
    for (int32_t tk = 0; tk < n_tokens; ++tk) {
        for (float &v : x) v = nd(rng);
        k::quantize_act(t, x.data(), act.data() + ab * static_cast<size_t>(tk), row_elems, false);
    }
    return act;
}

// threads: pool size; tokens: 0 = matvec_rows, else matmat_rows with that many tokens.
// rows_per_task: rows handed to one matvec_rows/matmat_rows call.
void run(benchmark::State &state, GgmlType t, k::Isa isa, size_t bytes, int32_t threads, int32_t tokens,
         int64_t rows_per_task = kRowsPerTask, int64_t row_elems = kRowElems) {
    if (!k::set_isa(isa)) {
        state.SkipWithError("ISA not supported by this CPU");
        return;
    }
    Matrix &m = matrix(t, bytes, row_elems);
    const std::vector<uint8_t> act = activations(t, tokens > 0 ? tokens : 1, row_elems);
    const size_t ab = k::act_row_bytes(t, row_elems, false);
    std::vector<float> y(static_cast<size_t>(m.rows) * static_cast<size_t>(tokens > 0 ? tokens : 1));
    moe::ThreadPool pool(threads);
    const auto *w = static_cast<const uint8_t *>(m.data.data());
    const int64_t tasks = (m.rows + rows_per_task - 1) / rows_per_task;
    for (auto _ : state) {
        pool.parallel_for(tasks, [&](int64_t task, int32_t) {
            const int64_t r0 = task * rows_per_task;
            const int64_t r1 = r0 + rows_per_task < m.rows ? r0 + rows_per_task : m.rows;
            if (tokens == 0)
                k::matvec_rows(t, row_elems, w, m.row_bytes, act.data(), y.data() + r0, r0, r1, false);
            else
                k::matmat_rows(t, row_elems, w, m.row_bytes, act.data(), ab, tokens, y.data(),
                               static_cast<size_t>(m.rows), r0, r1, false);
        });
        benchmark::ClobberMemory();
    }
    benchmark::DoNotOptimize(y.data());
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * m.rows * static_cast<int64_t>(m.row_bytes));
    if (tokens > 0)
        state.counters["tokens"] = benchmark::Counter(static_cast<double>(state.iterations()) * tokens,
                                                      benchmark::Counter::kIsRate);
}

void BM_Matvec(benchmark::State &state, GgmlType t, k::Isa isa) {
    run(state, t, isa, kWeightBytes, static_cast<int32_t>(state.range(0)), 0);
}
void BM_Matmat(benchmark::State &state, GgmlType t, k::Isa isa) {
    run(state, t, isa, kWeightBytes, 1, static_cast<int32_t>(state.range(0)));
}
void BM_MatvecCached(benchmark::State &state, GgmlType t, k::Isa isa) {
    run(state, t, isa, kCachedBytes, 1, 0, int64_t{1} << 40);  // one call over all rows
}
void BM_MatmatCached(benchmark::State &state, GgmlType t, k::Isa isa) {
    run(state, t, isa, kCachedBytes, 1, static_cast<int32_t>(state.range(0)), int64_t{1} << 40);
}
void BM_MatShort(benchmark::State &state, GgmlType t, k::Isa isa) {
    run(state, t, isa, kWeightBytes, 1, static_cast<int32_t>(state.range(0)), 256, kShortRowElems);
}

int register_all() {
    const GgmlType types[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,
                              GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                              GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q2_K,
                              GgmlType::Q3_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4};
    const k::Isa isas[] = {k::Isa::scalar, k::Isa::avx2, k::Isa::avx512};
    auto name = [](const char *kind, GgmlType t, k::Isa isa) {
        return std::string(kind) + "/" + moe::type_traits(t).name + "/" + k::isa_name(isa);
    };
    // Grouped by type so each matrix is generated once.
    for (GgmlType t : types) {
        for (k::Isa isa : isas)
            benchmark::RegisterBenchmark(name("matvec", t, isa).c_str(), BM_Matvec, t, isa)
                ->Arg(1)
                ->Arg(2)
                ->UseRealTime()
                ->MeasureProcessCPUTime()
                ->Unit(benchmark::kMillisecond);
        for (k::Isa isa : isas) {
            if (isa == k::Isa::scalar) continue;
            benchmark::RegisterBenchmark(name("matmat", t, isa).c_str(), BM_Matmat, t, isa)
                ->Arg(1)
                ->Arg(4)
                ->Arg(8)
                ->UseRealTime()
                ->MeasureProcessCPUTime()
                ->Unit(benchmark::kMillisecond);
        }
    }
    for (GgmlType t : types)
        for (k::Isa isa : isas)
            benchmark::RegisterBenchmark(name("matvec_l2", t, isa).c_str(), BM_MatvecCached, t, isa)
                ->UseRealTime()
                ->MeasureProcessCPUTime()
                ->Unit(benchmark::kMicrosecond);
    for (GgmlType t : types)
        for (k::Isa isa : isas) {
            if (isa == k::Isa::scalar) continue;
            benchmark::RegisterBenchmark(name("matmat_l2", t, isa).c_str(), BM_MatmatCached, t, isa)
                ->Arg(4)
                ->Arg(8)
                ->UseRealTime()
                ->MeasureProcessCPUTime()
                ->Unit(benchmark::kMicrosecond);
        }
    for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::IQ4_XS})
        for (k::Isa isa : isas) {
            benchmark::RegisterBenchmark(name("matvec_short", t, isa).c_str(), BM_MatShort, t, isa)
                ->Arg(0)
                ->UseRealTime()
                ->MeasureProcessCPUTime()
                ->Unit(benchmark::kMillisecond);
            if (isa != k::Isa::scalar)
                benchmark::RegisterBenchmark(name("matmat_short", t, isa).c_str(), BM_MatShort, t, isa)
                    ->Arg(4)
                    ->UseRealTime()
                    ->MeasureProcessCPUTime()
                    ->Unit(benchmark::kMillisecond);
        }
    return 0;
}
const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
