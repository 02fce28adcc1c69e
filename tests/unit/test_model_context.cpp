// The Context on small generated models of every architecture: multi-token
// steps equal one-token steps bit for bit, errors leave the context
// unchanged, context_full, reset, BUSY detection, and load-time checks.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "../../capi/context_handle.hpp"
#include "common/error.hpp"
#include "runtime/context.hpp"
#include "support/generated_models.hpp"
#include "support/paths.hpp"

namespace {

using moe::test::context_params;
using moe::test::step;

std::string model_path(const std::string &arch, const std::string &extra = "") {
    return moe::test::generated_model("model_context", arch,
                                      "--n-embd 256 --n-head 4 --n-head-kv 2 --n-layer 2 --n-expert 8 "
                                      "--n-expert-used 3 --n-ff-expert 256 --n-vocab 300 --n-ctx 64 --seed 7",
                                      extra);
}

#define REQUIRE_MODEL(var, ...) REQUIRE_GENERATED_MODEL(var, model_path(__VA_ARGS__))

const std::vector<int32_t> kTokens = {5, 17, 250, 3, 99, 42, 7, 131, 64, 2};

class EveryArch : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(EveryArch, BatchedStepsEqualOneTokenSteps) {
    const auto &[arch, exact] = GetParam();
    REQUIRE_MODEL(path, arch, "--quant-mix mixed");
    moe::Context all(context_params(path, exact));
    const auto batched = step(all, kTokens);
    moe::ContextParams small_batch = context_params(path, exact);
    small_batch.max_batch = 4;  // forces internal chunks of 4 + 4 + 2
    moe::Context chunked(small_batch);
    EXPECT_EQ(step(chunked, kTokens), batched);
    moe::Context single(context_params(path, exact));
    std::vector<float> last;
    for (int32_t t : kTokens) last = step(single, {t});
    EXPECT_EQ(last, batched);
    EXPECT_EQ(single.n_past(), int32_t(kTokens.size()));
}

INSTANTIATE_TEST_SUITE_P(Model, EveryArch,
                         ::testing::Combine(::testing::Values("qwen3moe", "llama", "olmoe", "qwen2moe", "gpt-oss",
                                                               "deepseek2"),
                                            ::testing::Bool()));

TEST(Context, InvalidStepsLeaveContextUnchanged) {
    REQUIRE_MODEL(path, "qwen3moe");
    moe::Context c(context_params(path, false, 8));
    step(c, {1, 2, 3});
    const std::vector<int32_t> bad_token = {4, 300};
    std::vector<float> logits(size_t(c.n_vocab()));
    try {
        c.step(bad_token.data(), 2, logits.data());
        FAIL() << "token 300 of a 300-token vocabulary was accepted";
    } catch (const moe::Error &e) {
        EXPECT_EQ(e.status(), moe::Status::invalid_argument);
        EXPECT_NE(std::string(e.what()).find("300"), std::string::npos) << e.what();
    }
    EXPECT_THROW(c.step(bad_token.data(), 0, logits.data()), moe::Error);
    const std::vector<int32_t> six(6, 1);
    try {
        c.step(six.data(), 6, logits.data());
        FAIL() << "9 tokens fit into n_ctx 8";
    } catch (const moe::Error &e) {
        EXPECT_EQ(e.status(), moe::Status::context_full);
    }
    EXPECT_EQ(c.n_past(), 3);
    const auto after = step(c, {4, 5});
    moe::Context fresh(context_params(path, false, 8));
    EXPECT_EQ(step(fresh, {1, 2, 3, 4, 5}), after);
    step(c, {6, 7, 8});
    EXPECT_EQ(c.n_past(), 8);
    try {
        step(c, {9});
        FAIL() << "a full context accepted a token";
    } catch (const moe::Error &e) {
        EXPECT_EQ(e.status(), moe::Status::context_full);
    }
}

TEST(Context, ResetReproducesTheFirstRun) {
    REQUIRE_MODEL(path, "olmoe");
    moe::Context c(context_params(path));
    const auto first = step(c, kTokens);
    c.reset();
    EXPECT_EQ(c.n_past(), 0);
    EXPECT_EQ(step(c, kTokens), first);
}

TEST(Context, ThreadCountDoesNotChangeLogits) {
    for (const char *arch : {"qwen2moe", "gpt-oss"}) {
        REQUIRE_MODEL(path, arch, "--quant-mix mixed");
        moe::ContextParams one = context_params(path);
        one.n_threads = 1;
        moe::ContextParams three = context_params(path);
        three.n_threads = 3;
        moe::Context a(one), b(three);
        EXPECT_EQ(step(a, kTokens), step(b, kTokens)) << arch;
    }
}

TEST(Context, LookaheadPrefetchDoesNotChangeLogits) {
    REQUIRE_MODEL(path, "qwen3moe", "--quant-mix mixed");
    moe::ContextParams off = context_params(path);
    off.prefetch = MOESTREAM_PREFETCH_OFF;
    moe::ContextParams ahead = context_params(path);
    ahead.prefetch = MOESTREAM_PREFETCH_LOOKAHEAD;
    moe::Context a(off), b(ahead);
    EXPECT_EQ(step(a, kTokens), step(b, kTokens));
}

TEST(Context, StatsCountTokensStepsAndHits) {
    REQUIRE_MODEL(path, "qwen3moe");
    moe::Context c(context_params(path));
    step(c, {1, 2, 3});
    step(c, {4});
    moestream_stats s{};
    c.fill_stats(s);
    EXPECT_EQ(s.tokens, 4u);
    EXPECT_EQ(s.steps, 2u);
    EXPECT_GT(s.step_ns, 0u);
    EXPECT_LE(s.compute_ns, s.step_ns);
    EXPECT_GT(s.attention_ns, 0u);
    EXPECT_GT(s.moe_ns, 0u);
    EXPECT_LE(s.attention_ns + s.moe_ns, s.compute_ns);
    // Every routed expert is a hit or (first use, mmap source) a miss: at
    // least n_expert_used per layer per step.
    EXPECT_GE(s.cache_hits + s.cache_misses, 2u * 3u);
    EXPECT_EQ(s.n_layer, 2);
    EXPECT_GT(s.layer_hits[0] + s.layer_misses[0], 0u);
    EXPECT_GT(s.kv_bytes, 0u);
    c.reset_stats();
    c.fill_stats(s);
    EXPECT_EQ(s.tokens, 0u);
}

TEST(Context, SecondThreadGetsBusy) {
    REQUIRE_MODEL(path, "qwen3moe");
    moestream_context handle;
    handle.ctx = std::make_unique<moe::Context>(context_params(path));
    moe::capi::ContextUse first(&handle);
    moe::Status seen = moe::Status::ok;
    std::thread other([&] {
        try {
            moe::capi::ContextUse second(&handle);
        } catch (const moe::Error &e) {
            seen = e.status();
        }
    });
    other.join();
    EXPECT_EQ(seen, moe::Status::busy);
}

TEST(ModelLoad, MissingFileAndTruncatedFileFailCleanly) {
    EXPECT_THROW(moe::Context(context_params("/nonexistent/model.gguf")), moe::Error);
    REQUIRE_MODEL(path, "llama");
    const std::string dir = moe::test::scratch_dir();
    const std::string cut = dir + "/cut.gguf";
    std::filesystem::copy_file(path, cut);
    std::filesystem::resize_file(cut, std::filesystem::file_size(path) / 2);
    try {
        moe::Context c(context_params(cut));
        FAIL() << "a truncated model opened";
    } catch (const moe::Error &e) {
        EXPECT_EQ(e.status(), moe::Status::bad_format) << e.what();
    }
}

TEST(ModelLoad, ExpertLayoutsDescribeEveryLayer) {
    REQUIRE_MODEL(path, "qwen2moe", "--quant-mix mixed");
    auto model = moe::Model::open(path);
    const auto layouts = model->expert_layouts();
    ASSERT_EQ(layouts.size(), 2u);
    for (const auto &l : layouts) {
        EXPECT_EQ(l.n_expert, 8);
        EXPECT_EQ(l.gate.cols, 256);
        EXPECT_EQ(l.down.rows, 256);
        EXPECT_GT(l.bytes_per_expert(), 0u);
        EXPECT_NE(l.up.mapped, nullptr);
    }
    EXPECT_TRUE(model->layer(0).shexp_up);
    EXPECT_GT(model->expert_bytes(), 0u);
}

}  // namespace
