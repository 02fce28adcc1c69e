// Decode attention of one layer against the KV cache, by context length:
// attention/<positions>: every KV head group (attend_kv_group) of the
// Qwen3-30B-A3B shape (32 query heads, 4 KV heads, head dimension 128, f16
// cache) for one new token at the given position, one thread. The time per
// call grows with the context; at long contexts it rivals the weight reads of
// a layer, so it is measured on its own.
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "model/attention.hpp"
#include "model/kv_cache.hpp"

namespace {

constexpr int32_t kHeads = 32, kHeadsKv = 4, kHeadDim = 128;

void BM_Attention(benchmark::State &state) {
    const int32_t n_pos = static_cast<int32_t>(state.range(0));
    moe::KvCache kv(1, n_pos, kHeadsKv * kHeadDim, kHeadsKv * kHeadDim, false);
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> k(kHeadsKv * kHeadDim), v(kHeadsKv * kHeadDim), q(kHeads * kHeadDim), out(kHeads * kHeadDim);
    for (int32_t p = 0; p < n_pos; ++p) {
        for (float &x : k) x = nd(rng);
        for (float &x : v) x = nd(rng);
        kv.store(0, p, k.data(), v.data());
    }
    for (float &x : q) x = nd(rng);
    moe::AttentionShape s{kHeads, kHeadsKv, kHeadDim, kHeadDim, 1.0f / std::sqrt(float(kHeadDim))};
    const int32_t group = kHeads / kHeadsKv;
    std::vector<float> scores(size_t(group) * size_t(n_pos));
    for (auto _ : state) {
        for (int32_t h = 0; h < kHeadsKv; ++h)
            moe::attend_kv_group(kv, 0, s, h, &q[size_t(h * group * kHeadDim)], n_pos - 1, scores.data(),
                                 &out[size_t(h * group * kHeadDim)]);
        benchmark::DoNotOptimize(out.data());
    }
    state.counters["positions/s"] =
        benchmark::Counter(double(state.iterations()) * n_pos, benchmark::Counter::kIsRate);
}

BENCHMARK(BM_Attention)->Name("attention")->Arg(64)->Arg(256)->Arg(1024)->Arg(4096)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
