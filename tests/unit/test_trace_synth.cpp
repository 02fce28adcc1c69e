// Synthetic traces reproduce the statistics they are asked for.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <utility>

#include "common/error.hpp"
#include "experts/trace_synth.hpp"
#include "support/paths.hpp"
#include "support/status_of.hpp"

namespace {

double top20_of_counts(const moe::RoutingTrace &t, uint32_t layer) {
    std::vector<double> c(t.header.n_expert);
    for (uint64_t tok = 0; tok < t.n_tokens; ++tok)
        for (uint16_t e : t.experts(tok, layer)) c[e] += 1;
    return moe::top20_share(c);
}

void expect_valid_rows(const moe::RoutingTrace &t) {
    for (uint64_t tok = 0; tok < t.n_tokens; ++tok)
        for (uint32_t l = 0; l < t.header.n_layer; ++l) {
            auto row = t.experts(tok, l);
            std::vector<uint16_t> v(row.begin(), row.end());
            std::sort(v.begin(), v.end());
            ASSERT_TRUE(std::adjacent_find(v.begin(), v.end()) == v.end());
            ASSERT_LT(v.back(), t.header.n_expert);
        }
}

}  // namespace

TEST(TraceSynth, ZipfSkewAndReuseMatchTheRequest) {
    for (double reuse : {0.0, 0.2, 0.4, 0.6}) {
        for (double skew : {0.4, 0.7, 1.0}) {
            moe::SynthConfig c;
            c.n_layer = 6;
            c.n_expert = 128;
            c.n_expert_used = 8;
            c.n_tokens = 4000;
            c.reuse = reuse;
            c.skew = skew;
            c.seed = 11;
            moe::RoutingTrace t = moe::synthesize_trace(c);
            expect_valid_rows(t);
            moe::TraceStats s = moe::measure_trace(t);
            EXPECT_NEAR(s.reuse, reuse, 0.02) << "skew " << skew;
            std::vector<double> zipf(c.n_expert);
            for (uint32_t r = 0; r < c.n_expert; ++r) zipf[r] = 1.0 / std::pow(r + 1.0, skew);
            // Top-k routing caps how often one expert can be chosen: compare with the feasible target.
            const double target = moe::top20_share(moe::feasible_inclusion(zipf, c.n_expert_used, reuse));
            for (double share : s.top20_share) EXPECT_NEAR(share, target, 0.04) << "reuse " << reuse << " skew " << skew;
        }
    }
}

TEST(TraceSynth, HeatPopularityIsReproducedPerLayer) {
    // A synthetic heat in the range real models show, plus the shared real one if present.
    moe::SynthConfig c;
    c.n_layer = 4;
    c.n_expert = 64;
    c.n_expert_used = 6;
    c.heat.resize(c.n_layer);
    for (uint32_t l = 0; l < c.n_layer; ++l)
        for (uint32_t e = 0; e < c.n_expert; ++e)
            c.heat[l].push_back(e % 7 == 3 ? 0.0 : 100.0 / std::pow(1.0 + (e * 37 + l * 11) % c.n_expert, 0.3 + 0.1 * l));
    c.n_tokens = 6000;
    c.reuse = 0.4;
    moe::RoutingTrace t = moe::synthesize_trace(c);
    expect_valid_rows(t);
    EXPECT_NEAR(moe::measure_trace(t).reuse, 0.4, 0.02);
    for (uint32_t l = 0; l < c.n_layer; ++l) {
        EXPECT_NEAR(top20_of_counts(t, l), moe::top20_share(c.heat[l]), 0.04) << "layer " << l;
        EXPECT_NEAR(top20_of_counts(t, l), moe::top20_share(moe::feasible_inclusion(c.heat[l], 6, 0.4)), 0.03);
        for (uint64_t tok = 0; tok < t.n_tokens; ++tok)
            for (uint16_t e : t.experts(tok, l)) ASSERT_NE(e % 7, 3) << "expert with zero heat was routed";
    }

    const std::string shared = moe::test::shared_dir();
    const std::string heat = shared + "/reference/routing/qwen3-30b-a3b-heat.json";
    if (shared.empty() || !std::filesystem::exists(heat)) GTEST_SKIP() << "shared heat file absent";
    moe::SynthConfig real;
    moe::load_heat_file(heat, real);
    EXPECT_EQ(real.n_layer, 48u);
    EXPECT_EQ(real.n_expert, 128u);
    EXPECT_EQ(real.n_expert_used, 8u);
    real.n_tokens = 3000;
    moe::RoutingTrace rt = moe::synthesize_trace(real);
    EXPECT_NEAR(moe::measure_trace(rt).reuse, 0.4, 0.02);
    for (uint32_t l = 0; l < real.n_layer; ++l)
        EXPECT_NEAR(top20_of_counts(rt, l), moe::top20_share(real.heat[l]), 0.05) << "layer " << l;
}

TEST(TraceSynth, SameSeedSameTraceAndBadInputsFail) {
    moe::SynthConfig c;
    c.n_layer = 3;
    c.n_tokens = 100;
    moe::RoutingTrace a = moe::synthesize_trace(c), b = moe::synthesize_trace(c);
    EXPECT_EQ(a.ids, b.ids);
    c.seed = 2;
    EXPECT_NE(moe::synthesize_trace(c).ids, a.ids);
    c.reuse = 1.5;
    EXPECT_THROW(moe::synthesize_trace(c), moe::Error);
    c.reuse = 0.4;
    c.n_expert_used = 200;
    EXPECT_THROW(moe::synthesize_trace(c), moe::Error);
    // The reader's shape limits: no synthesised trace it would refuse.
    c.n_layer = moe::kMaxTraceLayers + 1;
    c.n_expert = c.n_expert_used = 1;
    c.n_tokens = 1;
    EXPECT_THROW(moe::synthesize_trace(c), moe::Error);
    const std::string dir = moe::test::scratch_dir();
    std::FILE *f = std::fopen((dir + "/h.json").c_str(), "w");
    std::fputs("{\"heat\": [[1, 2], [3]]}", f);
    std::fclose(f);
    moe::SynthConfig d;
    EXPECT_THROW(moe::load_heat_file(dir + "/h.json", d), moe::Error);
}

TEST(TraceSynth, HeatFileNeedsFiniteCountsAndAWholeK) {
    const std::string dir = moe::test::scratch_dir();
    auto load = [&](const std::string &heat, const std::string &k, std::string *message) {
        std::FILE *f = std::fopen((dir + "/h.json").c_str(), "w");
        std::fprintf(f, "{\"heat\": %s, \"k\": %s}", heat.c_str(), k.c_str());
        std::fclose(f);
        moe::SynthConfig c;
        const moe::Status s = moe::test::status_of([&] { moe::load_heat_file(dir + "/h.json", c); }, message);
        return std::make_pair(s, c.n_expert_used);
    };
    const std::string heat = "[[1, 2, 3, 4], [4, 3, 2, 1]]";
    std::string message;
    EXPECT_EQ(load(heat, "2", &message), std::make_pair(moe::Status::ok, 2u)) << message;
    EXPECT_EQ(load(heat, "2.0", &message), std::make_pair(moe::Status::ok, 2u)) << message;
    // 4294967298 and 2.7 were both cast to 2.
    for (const char *k : {"4294967298", "2.7", "-1", "inf", "1e400"}) {
        EXPECT_EQ(load(heat, k, &message).first, moe::Status::bad_format) << k;
        EXPECT_NE(message.find("h.json"), std::string::npos) << message;
    }
    for (const char *bad : {"[[1, 2, inf, 4]]", "[[1, 2, 1e999, 4]]", "[[1, nan, 3, 4]]", "[[1, 2, -infinity, 4]]"}) {
        EXPECT_EQ(load(bad, "2", &message).first, moe::Status::bad_format) << bad;
        EXPECT_NE(message.find("not finite"), std::string::npos) << message;
    }
}

namespace {

// Share of a layer's draws that are not reuses (not in the previous token's
// set) and come from the `window` tokens before the previous one.
double window_share_of_draws(const moe::RoutingTrace &t, uint32_t window) {
    double draws = 0, from_window = 0;
    for (uint32_t l = 0; l < t.header.n_layer; ++l)
        for (uint64_t tok = window + 1; tok < t.n_tokens; ++tok) {
            auto prev = t.experts(tok - 1, l);
            for (uint16_t e : t.experts(tok, l)) {
                if (std::find(prev.begin(), prev.end(), e) != prev.end()) continue;
                draws += 1;
                for (uint64_t back = 2; back <= window; ++back) {
                    auto set = t.experts(tok - back, l);
                    if (std::find(set.begin(), set.end(), e) != set.end()) {
                        from_window += 1;
                        break;
                    }
                }
            }
        }
    return from_window / draws;
}

}  // namespace

TEST(TraceSynth, AWindowBringsBackExpertsOfRecentTokens) {
    moe::SynthConfig c;
    c.n_layer = 4;
    c.n_tokens = 3000;
    c.seed = 5;
    const moe::RoutingTrace order1 = moe::synthesize_trace(c);
    c.window = 12;
    c.recall = 0.5;
    const moe::RoutingTrace windowed = moe::synthesize_trace(c);
    expect_valid_rows(windowed);
    // Order-1 draws hit the window's experts by chance (44% here: ~60 of 128
    // experts in 11 tokens, the popular ones more likely); with recall 0.5 half
    // the draws come from there on purpose (66%), and the reuse and popularity
    // asked for stay.
    const double chance = window_share_of_draws(order1, c.window);
    const double recalled = window_share_of_draws(windowed, c.window);
    EXPECT_LT(chance, 0.5);
    EXPECT_GT(recalled, std::max(0.6, chance + 0.15));
    const moe::TraceStats s = moe::measure_trace(windowed);
    EXPECT_NEAR(s.reuse, c.reuse, 0.02);
    for (double share : s.top20_share) EXPECT_NEAR(share, moe::measure_trace(order1).median_top20, 0.04);
    c.recall = 1.5;
    EXPECT_THROW(moe::synthesize_trace(c), moe::Error);
    c.recall = 0.5;
    c.window = 70000;
    EXPECT_THROW(moe::synthesize_trace(c), moe::Error);
    c.window = 0;  // a recall needs a window to draw from
    EXPECT_THROW(moe::synthesize_trace(c), moe::Error);
}
