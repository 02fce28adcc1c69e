// Decode attention of one layer against the KV cache, by context length:
// attention/<positions>: every KV head group (attend_kv_group) of the
// Qwen3-30B-A3B shape (32 query heads, 4 KV heads, head dimension 128, f16
// cache) for one new token at the given position, one thread;
// attention_f32/<positions>: the same with the f32 cache of exact mode;
// attention_latent/<positions>: latent attention of the DeepSeek-V2-Lite shape
// (16 query heads on one cached row of 576, whose first 512 elements are the
// value; f16); attention_48_layers/<positions>: the first shape over all 48
// layers for one token, caches that outgrow the CPU's as a decode's do. The
// time per call grows with the context; at long contexts it rivals the weight
// reads of a layer, so it is measured on its own.
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "model/attention.hpp"
#include "model/kv_cache.hpp"

namespace {

struct Shape {
    int32_t heads, heads_kv, dk, dv;
    bool latent;  // keys only: values are the keys' first dv elements
    bool f32;
};

void BM_Attention(benchmark::State &state, Shape c) {
    const int32_t n_pos = static_cast<int32_t>(state.range(0));
    moe::KvCache kv(1, n_pos, c.heads_kv * c.dk, c.latent ? 0 : c.heads_kv * c.dv, c.f32);
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> k(size_t(c.heads_kv * c.dk)), v(size_t(c.heads_kv * c.dv));
    std::vector<float> q(size_t(c.heads * c.dk)), out(size_t(c.heads * c.dv));
    for (int32_t p = 0; p < n_pos; ++p) {
        for (float &x : k) x = nd(rng);
        for (float &x : v) x = nd(rng);
        kv.store(0, p, k.data(), v.data());
    }
    for (float &x : q) x = nd(rng);
    moe::AttentionShape s{c.heads, c.heads_kv, c.dk, c.dv, 1.0f / std::sqrt(float(c.dk))};
    const int32_t group = c.heads / c.heads_kv;
    std::vector<float> scores(size_t(group) * size_t(n_pos));
    for (auto _ : state) {
        for (int32_t h = 0; h < c.heads_kv; ++h)
            moe::attend_kv_group(kv, 0, s, h, &q[size_t(h * group * c.dk)], n_pos - 1, scores.data(),
                                 &out[size_t(h * group * c.dv)]);
        benchmark::DoNotOptimize(out.data());
    }
    state.counters["positions/s"] =
        benchmark::Counter(double(state.iterations()) * n_pos, benchmark::Counter::kIsRate);
}

// Every layer of the 48-layer model for one token: 48 caches of n_pos
// positions (2 KiB a position) outgrow the CPU's caches as a decode's do, so
// the rows come from memory.
void BM_AttentionLayers(benchmark::State &state) {
    const Shape c{32, 4, 128, 128, false, false};
    const int32_t n_layer = 48, n_pos = static_cast<int32_t>(state.range(0));
    moe::KvCache kv(n_layer, n_pos, c.heads_kv * c.dk, c.heads_kv * c.dv, false);
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<std::vector<float>> pool(61, std::vector<float>(size_t(c.heads_kv * c.dk)));
    for (auto &row : pool)
        for (float &x : row) x = nd(rng);
    for (int32_t l = 0; l < n_layer; ++l)
        for (int32_t p = 0; p < n_pos; ++p)
            kv.store(l, p, pool[size_t(p + l) % pool.size()].data(), pool[size_t(p + 2 * l + 1) % pool.size()].data());
    std::vector<float> q(size_t(c.heads * c.dk)), out(size_t(c.heads * c.dv));
    for (float &x : q) x = nd(rng);
    moe::AttentionShape s{c.heads, c.heads_kv, c.dk, c.dv, 1.0f / std::sqrt(float(c.dk))};
    const int32_t group = c.heads / c.heads_kv;
    std::vector<float> scores(size_t(group) * size_t(n_pos));
    for (auto _ : state) {
        for (int32_t l = 0; l < n_layer; ++l)
            for (int32_t h = 0; h < c.heads_kv; ++h)
                moe::attend_kv_group(kv, l, s, h, &q[size_t(h * group * c.dk)], n_pos - 1, scores.data(),
                                     &out[size_t(h * group * c.dv)]);
        benchmark::DoNotOptimize(out.data());
    }
}

BENCHMARK_CAPTURE(BM_Attention, f16, Shape{32, 4, 128, 128, false, false})
    ->Name("attention")
    ->Arg(64)
    ->Arg(256)
    ->Arg(1024)
    ->Arg(4096)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Attention, f32, Shape{32, 4, 128, 128, false, true})
    ->Name("attention_f32")
    ->Arg(64)
    ->Arg(256)
    ->Arg(1024)
    ->Arg(4096)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AttentionLayers)->Name("attention_48_layers")->Arg(400)->Arg(2048)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Attention, latent, Shape{16, 1, 576, 512, true, false})
    ->Name("attention_latent")
    ->Arg(64)
    ->Arg(256)
    ->Arg(1024)
    ->Arg(4096)
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
