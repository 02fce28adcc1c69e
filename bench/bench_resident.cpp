// End-to-end resident decode and prompt processing on a model named by
// MOESTREAM_BENCH_MODEL (skipped when unset), mmap I/O with every weight in
// the page cache: tokens/s and weight bytes touched per second (dense weights
// without the embedding table, plus the routed experts each step used).
// MOESTREAM_BENCH_THREADS sets the compute threads (default: physical cores).
// 'moestream bench --io-mode resident' reports the same run against a memory
// bandwidth probe; this is the same measurement as a Google Benchmark.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "runtime/context.hpp"

namespace {

const char *model_path() { return std::getenv("MOESTREAM_BENCH_MODEL"); }

std::unique_ptr<moe::Context> &context() {
    static std::unique_ptr<moe::Context> ctx = [] {
        moe::ContextParams p;
        p.model_path = model_path();
        p.io_mode = MOESTREAM_IO_MMAP;
        p.n_ctx = 1024;
        p.profile_disabled = true;
        if (const char *t = std::getenv("MOESTREAM_BENCH_THREADS")) p.n_threads = std::atoi(t);
        return std::make_unique<moe::Context>(p);
    }();
    return ctx;
}

// Dense weight bytes a token reads: everything but the experts and the embedding table.
uint64_t dense_touched(const moe::Model &m) {
    const moe::MatrixView &embd = m.weights().token_embd;
    return m.dense_bytes() - uint64_t(embd.rows) * embd.row_bytes + embd.row_bytes;
}

uint64_t expert_requests(const moe::Context &ctx) {
    moestream_stats s;
    s.struct_size = sizeof s;
    ctx.fill_stats(s);
    return s.cache_hits + s.cache_misses;
}

std::vector<int32_t> prompt_tokens(int32_t n, int32_t n_vocab) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) t[size_t(i)] = (i * 7919 + 13) % std::min(n_vocab, 932);
    return t;
}

void set_counters(benchmark::State &state, moe::Context &ctx, uint64_t tokens, uint64_t requests) {
    const moe::Model &m = ctx.model();
    const auto layouts = m.expert_layouts();
    const double per_expert = layouts.empty() ? 0 : double(layouts[0].bytes_per_expert());
    const double touched = double(dense_touched(m)) * double(state.iterations()) + per_expert * double(requests);
    state.counters["tok/s"] = benchmark::Counter(double(tokens), benchmark::Counter::kIsRate);
    state.counters["touched_B/s"] = benchmark::Counter(touched, benchmark::Counter::kIsRate);
}

void BM_ResidentDecode(benchmark::State &state) {
    if (!model_path()) return state.SkipWithError("MOESTREAM_BENCH_MODEL is not set");
    moe::Context &ctx = *context();
    const int32_t n_vocab = ctx.model().hparams().n_vocab;
    std::vector<float> logits(static_cast<size_t>(n_vocab));
    const std::vector<int32_t> prompt = prompt_tokens(16, n_vocab);
    ctx.reset();
    ctx.step(prompt.data(), int32_t(prompt.size()), logits.data());
    int32_t next = 1;
    const uint64_t req0 = expert_requests(ctx);
    for (auto _ : state) {
        if (ctx.n_past() + 1 >= ctx.n_ctx()) {
            state.PauseTiming();
            ctx.reset();
            ctx.step(prompt.data(), int32_t(prompt.size()), logits.data());
            state.ResumeTiming();
        }
        ctx.step(&next, 1, logits.data());
        next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    }
    // Requests made by re-prompting inside PauseTiming are few; they are not subtracted.
    set_counters(state, ctx, uint64_t(state.iterations()), expert_requests(ctx) - req0);
}
BENCHMARK(BM_ResidentDecode)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_ResidentPrefill(benchmark::State &state) {
    if (!model_path()) return state.SkipWithError("MOESTREAM_BENCH_MODEL is not set");
    moe::Context &ctx = *context();
    const int32_t n = int32_t(state.range(0));
    const int32_t n_vocab = ctx.model().hparams().n_vocab;
    std::vector<float> logits(static_cast<size_t>(n_vocab));
    const std::vector<int32_t> prompt = prompt_tokens(n, n_vocab);
    for (auto _ : state) {
        ctx.reset();
        ctx.step(prompt.data(), n, logits.data());
    }
    state.counters["tok/s"] = benchmark::Counter(double(n) * double(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ResidentPrefill)->Arg(64)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
