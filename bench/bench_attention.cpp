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

#include <algorithm>
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

const Shape kQwen3{32, 4, 128, 128, false, false};
const Shape kQwen3F32{32, 4, 128, 128, false, true};           // the f32 cache of exact mode
const Shape kDeepSeekV2LiteLatent{16, 1, 576, 512, true, false};  // one cached row of 576 per position

// A cache of n_layer layers holding n_pos positions, a query for one token
// and the buffers attend_kv_group writes. The rows are drawn from a pool of
// 61 random rows (a prime, so neighbouring positions and layers differ):
// filling 48 layers one random number at a time would take longer than the
// measurement.
class Decode {
public:
    Decode(const Shape &c, int32_t n_layer, int32_t n_pos)
        : c_(c), n_layer_(n_layer), n_pos_(n_pos), group_(c.heads / c.heads_kv),
          kv_(n_layer, n_pos, c.heads_kv * c.dk, c.latent ? 0 : c.heads_kv * c.dv, c.f32),
          s_{c.heads, c.heads_kv, c.dk, c.dv, 1.0f / std::sqrt(float(c.dk))}, q_(size_t(c.heads * c.dk)),
          out_(size_t(c.heads * c.dv)), scores_(size_t(group_) * size_t(n_pos)) {
        std::mt19937 rng(1);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::vector<std::vector<float>> pool(61, std::vector<float>(size_t(c.heads_kv * std::max(c.dk, c.dv))));
        for (auto &row : pool)
            for (float &x : row) x = nd(rng);
        for (int32_t l = 0; l < n_layer; ++l)
            for (int32_t p = 0; p < n_pos; ++p)
                kv_.store(l, p, pool[size_t(p + l) % pool.size()].data(),
                          pool[size_t(p + 2 * l + 1) % pool.size()].data());
        for (float &x : q_) x = nd(rng);
    }

    // One token's attention over every layer: each KV head group in turn.
    void run() {
        for (int32_t l = 0; l < n_layer_; ++l)
            for (int32_t h = 0; h < c_.heads_kv; ++h)
                moe::attend_kv_group(kv_, l, s_, h, &q_[size_t(h * group_ * c_.dk)], n_pos_ - 1, scores_.data(),
                                     &out_[size_t(h * group_ * c_.dv)]);
        benchmark::DoNotOptimize(out_.data());
    }

private:
    Shape c_;
    int32_t n_layer_, n_pos_, group_;
    moe::KvCache kv_;
    moe::AttentionShape s_;
    std::vector<float> q_, out_, scores_;
};

void BM_Attention(benchmark::State &state, Shape c) {
    const int32_t n_pos = static_cast<int32_t>(state.range(0));
    Decode d(c, 1, n_pos);
    for (auto _ : state) d.run();
    state.counters["positions/s"] =
        benchmark::Counter(double(state.iterations()) * n_pos, benchmark::Counter::kIsRate);
}

// Every layer of the 48-layer model for one token: 48 caches of n_pos
// positions (2 KiB a position) outgrow the CPU's caches as a decode's do, so
// the rows come from memory.
void BM_AttentionLayers(benchmark::State &state) {
    Decode d(kQwen3, 48, static_cast<int32_t>(state.range(0)));
    for (auto _ : state) d.run();
}

// The context lengths of the single-layer cases: 1031 ends 7 keys past a
// whole tile (of 8 or 16 positions), as most contexts of a decode end
// somewhere inside one.
void contexts(benchmark::internal::Benchmark *b) {
    for (const int64_t n : {64, 256, 1024, 1031, 4096}) b->Arg(n);
    b->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(BM_Attention, f16, kQwen3)->Name("attention")->Apply(contexts);
BENCHMARK_CAPTURE(BM_Attention, f32, kQwen3F32)->Name("attention_f32")->Apply(contexts);
BENCHMARK(BM_AttentionLayers)->Name("attention_48_layers")->Arg(400)->Arg(2048)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Attention, latent, kDeepSeekV2LiteLatent)
    ->Name("attention_latent")
    ->Apply(contexts);

}  // namespace

BENCHMARK_MAIN();
