// One decode step of a routed-expert layer, the way the forward pass runs
// it, against one contiguous matrix of the same bytes: where the two differ,
// the expert layout (eight scattered experts, short down rows, two hand-offs
// per layer) costs bandwidth that the kernels alone do not show.
//
//  - experts/<gate type>-<down type>/<threads>: 8 of 128 experts of the
//    Qwen3-30B-A3B shape (n_embd 2048, n_ff 768), a different 8 each
//    iteration so nothing stays in cache; gate and up rows in chunks, SwiGLU,
//    then the down rows, split by rows_per_task as the forward pass does;
//  - contiguous/<type>/<threads>: matvec of the same bytes per iteration
//    over 2048-element rows, moving through a large matrix.
// GB/s counts weight bytes.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/numa_memory.hpp"
#include "common/thread_pool.hpp"
#include "kernels/kernels.hpp"
#include "model/swiglu.hpp"
#include "runtime/linear.hpp"

namespace {

namespace k = moe::kernels;
using moe::GgmlType;

constexpr int64_t kEmbd = 2048, kFf = 768, kExperts = 128, kUsed = 8;

// Random quants with sane fp16 scales (K-quants only).
void fill(GgmlType t, uint8_t *p, size_t bytes, uint32_t seed) {
    std::mt19937 rng(seed);
    for (size_t i = 0; i + 4 <= bytes; i += 4) {
        const uint32_t v = rng();
        std::memcpy(p + i, &v, 4);
    }
    const auto &tr = moe::type_traits(t);
    std::uniform_real_distribution<float> d(0.001f, 0.01f);
    for (size_t off = 0; off + tr.block_bytes <= bytes; off += tr.block_bytes) {
        const uint16_t a = k::f32_to_fp16(d(rng)), b = k::f32_to_fp16(d(rng));
        if (t == GgmlType::Q6_K) {
            std::memcpy(p + off + tr.block_bytes - 2, &a, 2);
        } else {
            std::memcpy(p + off, &a, 2);
            std::memcpy(p + off + 2, &b, 2);
        }
    }
}

struct ExpertLayer {
    GgmlType gate_type, down_type;
    size_t gate_row, down_row, gate_bytes, down_bytes;
    moe::NumaBuffer gate, up, down;
    std::vector<uint8_t> xq, hq;
    std::vector<float> g, u, h, y;

    ExpertLayer(GgmlType gt, GgmlType dt)
        : gate_type(gt),
          down_type(dt),
          gate_row(moe::row_bytes(gt, kEmbd)),
          down_row(moe::row_bytes(dt, kFf)),
          gate_bytes(gate_row * kFf),
          down_bytes(down_row * kEmbd),
          gate(gate_bytes * kExperts, moe::NumaPlacement::local),
          up(gate_bytes * kExperts, moe::NumaPlacement::local),
          down(down_bytes * kExperts, moe::NumaPlacement::local),
          g(kUsed * kFf),
          u(kUsed * kFf),
          h(kUsed * kFf),
          y(kUsed * kEmbd) {
        fill(gt, static_cast<uint8_t *>(gate.data()), gate.size(), 1);
        fill(gt, static_cast<uint8_t *>(up.data()), up.size(), 2);
        fill(dt, static_cast<uint8_t *>(down.data()), down.size(), 3);
        std::vector<float> x(kEmbd);
        std::mt19937 rng(4);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (float &v : x) v = nd(rng);
        xq.resize(k::act_row_bytes(gt, kEmbd, false));
        k::quantize_act(gt, x.data(), xq.data(), kEmbd, false);
        hq.resize(kUsed * k::act_row_bytes(dt, kFf, false));
    }
};

void BM_Experts(benchmark::State &state, GgmlType gt, GgmlType dt) {
    static std::unique_ptr<ExpertLayer> layer;
    if (!layer || layer->gate_type != gt || layer->down_type != dt) layer = std::make_unique<ExpertLayer>(gt, dt);
    ExpertLayer &L = *layer;
    const int32_t threads = static_cast<int32_t>(state.range(0));
    moe::ThreadPool pool(threads);
    const size_t h_row = k::act_row_bytes(dt, kFf, false);
    const int64_t per_a = std::min<int64_t>(kFf, moe::rows_per_task(kFf * kUsed, 2 * L.gate_row, threads));
    const int64_t chunks_a = (kFf + per_a - 1) / per_a;
    const int64_t per_b = std::min<int64_t>(kEmbd, moe::rows_per_task(kEmbd * kUsed, L.down_row, threads));
    const int64_t chunks_b = (kEmbd + per_b - 1) / per_b;

    std::mt19937 rng(5);
    int32_t ids[kUsed];
    for (auto _ : state) {
        for (int32_t i = 0; i < kUsed; ++i) ids[i] = static_cast<int32_t>(rng() % kExperts);
        pool.parallel_for(kUsed * chunks_a, [&](int64_t task, int32_t) {
            const int64_t e = task / chunks_a, r0 = (task % chunks_a) * per_a, r1 = std::min(kFf, r0 + per_a);
            const size_t at = size_t(ids[e]) * L.gate_bytes;
            float *g = &L.g[size_t(e) * kFf], *u = &L.u[size_t(e) * kFf], *h = &L.h[size_t(e) * kFf];
            k::matmat_rows(gt, kEmbd, static_cast<const uint8_t *>(L.gate.data()) + at, L.gate_row, L.xq.data(),
                           L.xq.size(), 1, g, kFf, r0, r1, false);
            k::matmat_rows(gt, kEmbd, static_cast<const uint8_t *>(L.up.data()) + at, L.gate_row, L.xq.data(),
                           L.xq.size(), 1, u, kFf, r0, r1, false);
            moe::swiglu(g + r0, u + r0, h + r0, r1 - r0);
        });
        for (int32_t e = 0; e < kUsed; ++e)
            k::quantize_act(dt, &L.h[size_t(e) * kFf], &L.hq[size_t(e) * h_row], kFf, false);
        pool.parallel_for(kUsed * chunks_b, [&](int64_t task, int32_t) {
            const int64_t e = task / chunks_b, r0 = (task % chunks_b) * per_b, r1 = std::min(kEmbd, r0 + per_b);
            const uint8_t *w = static_cast<const uint8_t *>(L.down.data()) + size_t(ids[e]) * L.down_bytes;
            k::matmat_rows(dt, kFf, w, L.down_row, &L.hq[size_t(e) * h_row], h_row, 1, &L.y[size_t(e) * kEmbd],
                           kEmbd, r0, r1, false);
        });
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * kUsed * int64_t(2 * L.gate_bytes + L.down_bytes));
}

// The same bytes per iteration as one expert layer, as one matvec over
// consecutive rows of a 1 GiB matrix.
void BM_Contiguous(benchmark::State &state, GgmlType t) {
    const size_t row = moe::row_bytes(t, kEmbd);
    const int64_t rows = int64_t((size_t{1} << 30) / row);
    static moe::NumaBuffer w;
    static GgmlType filled = GgmlType::F32;
    if (!w.data() || filled != t) {
        w = moe::NumaBuffer(size_t(rows) * row, moe::NumaPlacement::local);
        fill(t, static_cast<uint8_t *>(w.data()), w.size(), 6);
        filled = t;
    }
    const int32_t threads = static_cast<int32_t>(state.range(0));
    moe::ThreadPool pool(threads);
    std::vector<float> x(kEmbd, 0.5f);
    std::vector<uint8_t> xq(k::act_row_bytes(t, kEmbd, false));
    k::quantize_act(t, x.data(), xq.data(), kEmbd, false);
    const int64_t step = int64_t(kUsed * 3 * kFf);  // rows of one expert layer's bytes (gate, up, down alike)
    std::vector<float> y(static_cast<size_t>(step), 0.0f);
    const int64_t per = moe::rows_per_task(step, row, threads);
    int64_t base = 0;
    for (auto _ : state) {
        if (base + step > rows) base = 0;
        pool.parallel_for((step + per - 1) / per, [&](int64_t task, int32_t) {
            const int64_t r0 = base + task * per, r1 = std::min(base + step, r0 + per);
            k::matvec_rows(t, kEmbd, static_cast<const uint8_t *>(w.data()), row, xq.data(), y.data() + (r0 - base),
                           r0, r1, false);
        });
        base += step;
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * step * int64_t(row));
}

int register_all() {
    for (auto [gt, dt] : {std::pair{GgmlType::Q4_K, GgmlType::Q4_K}, std::pair{GgmlType::Q4_K, GgmlType::Q6_K}}) {
        const std::string name = std::string("experts/") + moe::type_traits(gt).name + "-" + moe::type_traits(dt).name;
        benchmark::RegisterBenchmark(name.c_str(), BM_Experts, gt, dt)->Arg(1)->Arg(2)->UseRealTime()->Unit(
            benchmark::kMicrosecond);
    }
    for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K})
        benchmark::RegisterBenchmark((std::string("contiguous/") + moe::type_traits(t).name).c_str(), BM_Contiguous, t)
            ->Arg(1)
            ->Arg(2)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
    return 0;
}
const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
