// Placement never changes results: logits are bit-identical across I/O modes
// (mmap, direct, pread, packed or GGUF slices), cache sizes, cache policies
// and prefetch modes, on a generated model.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "common/error.hpp"
#include "runtime/context.hpp"
#include "support/paths.hpp"
#include "support/scoped_env.hpp"

namespace {

using namespace moe;

std::string cli() { return test::binary_dir() + "/moestream"; }


struct LogitsRun {
    std::vector<float> logits;  // last-token logits after every decode step
    moestream_stats stats{};
};

LogitsRun run_model(ContextParams p, const std::vector<int32_t> &tokens) {
    p.profile_disabled = true;
    Context ctx(p);
    LogitsRun r;
    const int32_t n_vocab = ctx.n_vocab();
    std::vector<float> out(static_cast<size_t>(n_vocab));
    // A short prompt as one batch, then token-by-token decode.
    ctx.step(tokens.data(), 4, out.data());
    r.logits.insert(r.logits.end(), out.begin(), out.end());
    for (size_t i = 4; i < tokens.size(); ++i) {
        ctx.step(&tokens[i], 1, out.data());
        r.logits.insert(r.logits.end(), out.begin(), out.end());
    }
    ctx.fill_stats(r.stats);
    return r;
}

// Placement never changes the result: the same logits, bit for bit.
::testing::AssertionResult same_logits(const LogitsRun &r, const LogitsRun &ref) {
    if (r.logits.size() != ref.logits.size())
        return ::testing::AssertionFailure() << r.logits.size() << " logits, expected " << ref.logits.size();
    if (std::memcmp(r.logits.data(), ref.logits.data(), ref.logits.size() * sizeof(float)) != 0)
        return ::testing::AssertionFailure() << "logits differ";
    return ::testing::AssertionSuccess();
}

// Each test generates its own model in its own scratch directory: ctest runs
// the tests of this file as parallel processes.
class StreamingLogits : public ::testing::Test {
protected:
    void SetUp() override {
        if (!std::filesystem::exists(cli())) GTEST_SKIP() << "CLI not built";
        dir_store_ = test::scratch_dir();
        model_store_ = dir_store_ + "/model.gguf";
        ASSERT_EQ(test::run(cli() + " generate --preset tiny --quant q4_k_m --layers 3 --experts 8 --top-k 2 --seed 9 -o " +
                            model_store_ + " > /dev/null 2>&1"),
                  0);
    }
    void TearDown() override {
        if (!dir_store_.empty()) std::filesystem::remove_all(dir_store_);
    }
    ContextParams params() const {
        ContextParams p;
        p.model_path = model_store_;
        p.n_threads = 1;
        p.n_ctx = 64;
        return p;
    }
    std::vector<int32_t> tokens() const { return {1, 5, 9, 2, 7, 3, 3, 8, 11, 4, 6, 10, 12, 1, 2, 14}; }
    void expect_same_logits_across_modes(const std::string &name, const std::string &generate_args);

    std::string dir_store_, model_store_;
    const std::string *dir_ = &dir_store_;
    const std::string *model_ = &model_store_;
};

TEST_F(StreamingLogits, BitIdenticalAcrossModesBudgetsPoliciesAndPrefetch) {
    ContextParams base = params();
    base.io_mode = MOESTREAM_IO_MMAP;
    const LogitsRun ref = run_model(base, tokens());
    ASSERT_FALSE(ref.logits.empty());

    const std::string packed = *model_ + ".moepack";
    int runs = 0;
    for (bool use_packed : {false, true}) {
        if (use_packed) ASSERT_EQ(test::run(cli() + " pack " + *model_ + " > /dev/null"), 0);
        for (int32_t mode : {MOESTREAM_IO_DIRECT, MOESTREAM_IO_PREAD})
            for (const char *slots : {"8", "11", "1000"})
                for (int32_t policy : {MOESTREAM_CACHE_LRU, MOESTREAM_CACHE_LFU_DECAY, MOESTREAM_CACHE_PINNED_HOT,
                                       MOESTREAM_CACHE_REUSE_AWARE})
                    for (int32_t prefetch : {MOESTREAM_PREFETCH_OFF, MOESTREAM_PREFETCH_PREVIOUS_TOKEN,
                                             MOESTREAM_PREFETCH_LOOKAHEAD, MOESTREAM_PREFETCH_BOTH})
                    for (int32_t depth : {1, 2}) {
                        if (std::string(slots) == "1000" && policy != MOESTREAM_CACHE_LRU) continue;
                        const bool looks_ahead = prefetch == MOESTREAM_PREFETCH_LOOKAHEAD || prefetch == MOESTREAM_PREFETCH_BOTH;
                        if (depth > 1 && !looks_ahead) continue;
                        test::ScopedEnv cap("MOESTREAM_CACHE_SLOTS", slots);
                        ContextParams p = params();
                        p.io_mode = mode;
                        p.cache_policy = policy;
                        p.prefetch = prefetch;
                        p.lookahead_layers = depth;
                        const LogitsRun r = run_model(p, tokens());
                        const std::string what = std::string(use_packed ? "packed" : "gguf") + " mode " +
                                                 std::to_string(mode) + " slots " + slots + " policy " +
                                                 std::to_string(policy) + " prefetch " + std::to_string(prefetch) +
                                                 " lookahead " + std::to_string(depth);
                        ASSERT_TRUE(same_logits(r, ref)) << what;
                        EXPECT_EQ(r.stats.io_mode, mode) << what;
                        EXPECT_GT(r.stats.cache_misses, 0u) << what;
                        EXPECT_GT(r.stats.bytes_read_demand, 0u) << what;
                        if (prefetch == MOESTREAM_PREFETCH_OFF) EXPECT_EQ(r.stats.prefetch_issued, 0u) << what;
                        ++runs;
                    }
        std::filesystem::remove(packed);
    }
    EXPECT_GT(runs, 50);
}

// Generates a model with `generate_args` and checks that the mapping, direct
// and pread reads, packed or not, with a cache smaller than a layer's experts
// and with prefetching all give the same logits.
void StreamingLogits::expect_same_logits_across_modes(const std::string &name, const std::string &generate_args) {
    const std::string model = *dir_ + "/" + name + ".gguf";
    ASSERT_EQ(test::run(cli() + " generate " + generate_args + " -o " + model + " > /dev/null 2>&1"), 0);
    ContextParams base = params();
    base.model_path = model;
    base.io_mode = MOESTREAM_IO_MMAP;
    const LogitsRun ref = run_model(base, tokens());
    ASSERT_FALSE(ref.logits.empty());
    for (bool use_packed : {false, true}) {
        if (use_packed) ASSERT_EQ(test::run(cli() + " pack " + model + " > /dev/null"), 0);
        for (int32_t mode : {MOESTREAM_IO_DIRECT, MOESTREAM_IO_PREAD})
            for (const char *slots : {"5", "1000"})
                for (int32_t prefetch : {MOESTREAM_PREFETCH_OFF, MOESTREAM_PREFETCH_BOTH}) {
                    test::ScopedEnv cap("MOESTREAM_CACHE_SLOTS", slots);
                    ContextParams p = base;
                    p.io_mode = mode;
                    p.prefetch = prefetch;
                    const LogitsRun r = run_model(p, tokens());
                    ASSERT_TRUE(same_logits(r, ref)) << name << (use_packed ? " packed" : " gguf") << " mode "
                                                     << mode << " slots " << slots << " prefetch " << prefetch;
                    EXPECT_GT(r.stats.cache_misses, 0u);
                }
        std::filesystem::remove(model + ".moepack");
    }
}

// gpt-oss's MXFP4 experts and resident bias tables stream like any other.
TEST_F(StreamingLogits, GptOssBitIdenticalAcrossModesAndBudgets) {
    expect_same_logits_across_modes("gpt-oss", "--preset gpt-oss-tiny --layers 3 --experts 8 --top-k 2 --seed 9");
}

// deepseek2's routed experts stream behind a dense lead layer while its
// shared experts and latent attention stay resident; the sigmoid,
// group-limited choice picks the same experts whatever the source.
TEST_F(StreamingLogits, Deepseek2BitIdenticalAcrossModesAndBudgets) {
    expect_same_logits_across_modes("deepseek2", "--preset deepseek2-tiny --seed 9");
}

TEST_F(StreamingLogits, MmapSourceReleasingExpertsMatchesDirectReads) {
    ContextParams base = params();
    base.io_mode = MOESTREAM_IO_DIRECT;
    const LogitsRun ref = run_model(base, tokens());
    ASSERT_FALSE(ref.logits.empty());
    // A share of 8 experts (of 24) makes the mmap source release and re-advise
    // experts all the time; the default share keeps every expert.
    for (const char *slots : {"8", ""})
        for (int32_t prefetch : {MOESTREAM_PREFETCH_OFF, MOESTREAM_PREFETCH_LOOKAHEAD, MOESTREAM_PREFETCH_BOTH}) {
            test::ScopedEnv cap("MOESTREAM_CACHE_SLOTS", slots);
            ContextParams p = params();
            p.io_mode = MOESTREAM_IO_MMAP;
            p.prefetch = prefetch;
            const LogitsRun r = run_model(p, tokens());
            const std::string what = std::string("mmap share ") + (*slots ? slots : "all") + " prefetch " +
                                     std::to_string(prefetch);
            ASSERT_TRUE(same_logits(r, ref)) << what;
            EXPECT_EQ(r.stats.io_mode, MOESTREAM_IO_MMAP) << what;
            EXPECT_GT(r.stats.cache_misses, 0u) << what;
            EXPECT_GT(r.stats.cache_hits, 0u) << what;
            EXPECT_GT(r.stats.bytes_read_demand, 0u) << what;  // bytes advised
            if (*slots) {
                EXPECT_GT(r.stats.evictions, 0u) << what;
                EXPECT_NE(std::string(r.stats.io_mode_reason).find("released"), std::string::npos)
                    << r.stats.io_mode_reason;
            } else {
                EXPECT_EQ(r.stats.evictions, 0u) << what;
                // Each expert is advised once, then hit: misses cannot exceed the experts.
                EXPECT_LE(r.stats.cache_misses, 24u) << what;
            }
            if (prefetch == MOESTREAM_PREFETCH_OFF) EXPECT_EQ(r.stats.prefetch_issued, 0u) << what;
        }
}

// Streaming experts, the dense weights move out of the file mapping into the
// engine's own memory (runtime/dense_copy.hpp), placed by the NUMA setting;
// in the mmap mode they stay mapped. The logits do not change either way.
TEST_F(StreamingLogits, DenseWeightsAreCopiedOutOfTheMappingWhenStreaming) {
    ContextParams base = params();
    base.io_mode = MOESTREAM_IO_MMAP;
    const LogitsRun ref = run_model(base, tokens());
    for (int32_t mode : {MOESTREAM_IO_MMAP, MOESTREAM_IO_DIRECT, MOESTREAM_IO_PREAD})
        for (int32_t numa : {MOESTREAM_NUMA_LOCAL, MOESTREAM_NUMA_INTERLEAVE}) {
            ContextParams p = params();
            p.io_mode = mode;
            p.numa_placement = numa;
            p.profile_disabled = true;
            const std::string what = "mode " + std::to_string(mode) + " numa " + std::to_string(numa);
            {
                Context ctx(p);
                const MappedFile &map = ctx.model().file().shard_mapping(0);
                auto mapped = [&map](const uint8_t *p) { return p >= map.data() && p < map.data() + map.size(); };
                const bool in_mapping = mapped(ctx.model().layer(0).wq.data);
                // The token embeddings (one row per token) stay mapped unless they are also the output head.
                const ModelWeights &w = ctx.model().weights();
                if (w.output.data != w.token_embd.data) EXPECT_TRUE(mapped(w.token_embd.data)) << what;
                EXPECT_EQ(mapped(w.output.data), mode == MOESTREAM_IO_MMAP) << what;
                const std::string &reason = ctx.io_mode_reason();
                if (mode == MOESTREAM_IO_MMAP) {
                    EXPECT_TRUE(in_mapping) << what;
                    EXPECT_EQ(reason.find("dense weights copied in"), std::string::npos) << reason;
                } else {
                    EXPECT_FALSE(in_mapping) << what;
                    EXPECT_NE(reason.find("dense weights copied in"), std::string::npos) << reason;
                    EXPECT_NE(reason.find("cache memory"), std::string::npos) << reason;
                    if (numa == MOESTREAM_NUMA_INTERLEAVE && numa_supported())
                        EXPECT_NE(reason.find("interleaved over"), std::string::npos) << reason;
                }
            }
            ASSERT_TRUE(same_logits(run_model(p, tokens()), ref)) << what;
        }
}

// Opening with `p` fails with invalid_argument and a message naming `needle`.
void expect_invalid_open(const ContextParams &p, const std::string &needle) {
    try {
        Context ctx(p);
        ADD_FAILURE() << "opened; expected an error naming " << needle;
    } catch (const Error &e) {
        EXPECT_EQ(e.status(), Status::invalid_argument);
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
}

TEST_F(StreamingLogits, NumaPlacementIsCheckedAndTheEnvironmentBeatsIt) {
    ContextParams p = params();
    p.io_mode = MOESTREAM_IO_DIRECT;
    p.profile_disabled = true;
    p.numa_placement = 7;
    expect_invalid_open(p, "numa_placement 7");
    {
        test::ScopedEnv numa("MOESTREAM_NUMA", "everywhere");
        p.numa_placement = MOESTREAM_NUMA_LOCAL;
        expect_invalid_open(p, "MOESTREAM_NUMA");
    }
    if (numa_supported()) {
        test::ScopedEnv numa("MOESTREAM_NUMA", "interleave");
        Context ctx(p);
        EXPECT_EQ(ctx.params().numa_placement, MOESTREAM_NUMA_INTERLEAVE);
        EXPECT_NE(ctx.io_mode_reason().find("interleaved over"), std::string::npos) << ctx.io_mode_reason();
    }
}

TEST_F(StreamingLogits, EnvironmentOverridesTheMode) {
    test::ScopedEnv mode("MOESTREAM_IO_MODE", "pread");
    ContextParams p = params();
    p.io_mode = MOESTREAM_IO_MMAP;
    const LogitsRun r = run_model(p, tokens());
    EXPECT_EQ(r.stats.io_mode, MOESTREAM_IO_PREAD);
    EXPECT_NE(std::string(r.stats.io_mode_reason).find("MOESTREAM_IO_MODE"), std::string::npos) << r.stats.io_mode_reason;
}

TEST_F(StreamingLogits, BudgetTooSmallForDenseWeightsNamesTheNumbers) {
    ContextParams p = params();
    p.io_mode = MOESTREAM_IO_DIRECT;
    p.memory_budget = 64 * 1024;
    try {
        run_model(p, tokens());
        FAIL() << "opened with a budget below the dense weights";
    } catch (const Error &e) {
        EXPECT_EQ(e.status(), Status::out_of_memory);
        EXPECT_NE(std::string(e.what()).find("dense"), std::string::npos) << e.what();
    }
}

TEST_F(StreamingLogits, UsageProfileWrittenOnCloseAndRead) {
    const std::string profile = *dir_ + "/usage.bin";
    std::filesystem::remove(profile);
    ContextParams p = params();
    p.io_mode = MOESTREAM_IO_DIRECT;
    p.profile_path = profile;
    {
        Context ctx(p);
        std::vector<float> out(static_cast<size_t>(ctx.n_vocab()));
        const auto t = tokens();
        ctx.step(t.data(), int32_t(t.size()), out.data());
    }
    ASSERT_TRUE(std::filesystem::exists(profile));
    EXPECT_GT(std::filesystem::file_size(profile), 32u);
    {
        Context ctx(p);  // reads it (pinned-hot by default) and still computes
        std::vector<float> out(static_cast<size_t>(ctx.n_vocab()));
        const auto t = tokens();
        ctx.step(t.data(), int32_t(t.size()), out.data());
    }
    std::filesystem::remove(profile);
}

}  // namespace
