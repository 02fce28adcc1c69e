// Building blocks of the forward pass against straightforward formulas.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <vector>

#include "model/attention.hpp"
#include "model/hparams.hpp"
#include "model/kv_cache.hpp"
#include "model/rms_norm.hpp"
#include "model/rope.hpp"
#include "model/router.hpp"
#include "model/swiglu.hpp"

namespace {

std::vector<float> random_vector(size_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (float &x : v) x = d(rng);
    return v;
}

TEST(RmsNorm, MatchesDoublePrecisionFormula) {
    const int64_t n = 300;
    auto x = random_vector(size_t(n), 1, 3.0f);
    auto w = random_vector(size_t(n), 2);
    std::vector<float> y(static_cast<size_t>(n));
    moe::rms_norm(x.data(), w.data(), y.data(), n, 1e-6f);
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double scale = 1.0 / std::sqrt(ss / double(n) + 1e-6);
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[size_t(i)], x[size_t(i)] * scale * w[size_t(i)], 1e-5) << i;
}

TEST(RmsNorm, InPlaceEqualsOutOfPlace) {
    auto x = random_vector(64, 3);
    auto w = random_vector(64, 4);
    std::vector<float> y(64);
    moe::rms_norm(x.data(), w.data(), y.data(), 64, 1e-5f);
    moe::rms_norm(x.data(), w.data(), x.data(), 64, 1e-5f);
    EXPECT_EQ(x, y);
}

// Naive rotation with angles from pow(): what RoPE means, independent of the
// iterative angle computation.
std::vector<float> naive_rope(std::vector<float> x, int32_t n_rot, float base, int32_t pos, bool neox) {
    for (int32_t i = 0; i < n_rot / 2; ++i) {
        const double theta = pos * std::pow(double(base), -2.0 * i / n_rot);
        const size_t a = neox ? size_t(i) : size_t(2 * i), b = neox ? size_t(i + n_rot / 2) : size_t(2 * i + 1);
        const double x0 = x[a], x1 = x[b];
        x[a] = float(x0 * std::cos(theta) - x1 * std::sin(theta));
        x[b] = float(x0 * std::sin(theta) + x1 * std::cos(theta));
    }
    return x;
}

TEST(Rope, NeoxAndNormalMatchNaiveRotation) {
    const int32_t head_dim = 64;
    for (int32_t n_rot : {64, 32}) {
        moe::RopeParams p;
        p.n_rot = n_rot;
        p.freq_base = 10000.0f;
        std::vector<float> cs(static_cast<size_t>(n_rot));
        for (int32_t pos : {0, 1, 7, 100}) {
            moe::rope_angles(p, pos, cs.data());
            for (bool neox : {true, false}) {
                auto x = random_vector(size_t(head_dim), uint32_t(pos + 10));
                auto want = naive_rope(x, n_rot, p.freq_base, pos, neox);
                moe::rope_apply(neox ? moe::RopeType::neox : moe::RopeType::normal, n_rot, cs.data(), x.data());
                for (int32_t i = 0; i < head_dim; ++i)
                    EXPECT_NEAR(x[size_t(i)], want[size_t(i)], 2e-4) << "n_rot " << n_rot << " pos " << pos
                                                                     << " neox " << neox << " i " << i;
            }
        }
    }
}

// Each product rounded to float before the sum, as every build and ISA computes
// it: a fused multiply-add (which GCC's vectorizer emits for this complex-
// multiply pattern on FMA targets even with contraction off) rounds once and
// differs in the last bit for about half of the pairs.
TEST(Rope, RotationRoundsEachProductBeforeTheSum) {
    for (moe::RopeType type : {moe::RopeType::normal, moe::RopeType::neox}) {
        for (int32_t n_rot : {16, 64, 128}) {
            const auto cs = random_vector(size_t(n_rot), 3);
            const auto before = random_vector(size_t(n_rot), uint32_t(n_rot));
            auto x = before;
            moe::rope_apply(type, n_rot, cs.data(), x.data());
            const int32_t half = n_rot / 2;
            for (int32_t i = 0; i < half; ++i) {
                const bool neox = type == moe::RopeType::neox;
                const size_t a = neox ? size_t(i) : size_t(2 * i), b = neox ? size_t(i + half) : size_t(2 * i + 1);
                const float c = cs[size_t(2 * i)], s = cs[size_t(2 * i + 1)];
                volatile float x0c = before[a] * c, x1s = before[b] * s, x0s = before[a] * s, x1c = before[b] * c;
                EXPECT_EQ(x[a], x0c - x1s) << "n_rot " << n_rot << " pair " << i << " neox " << neox;
                EXPECT_EQ(x[b], x0s + x1c) << "n_rot " << n_rot << " pair " << i << " neox " << neox;
            }
        }
    }
}

TEST(Rope, PositionZeroIsIdentityAndDimsBeyondNRotPassThrough) {
    moe::RopeParams p;
    p.n_rot = 16;
    std::vector<float> cs(16);
    moe::rope_angles(p, 0, cs.data());
    auto x = random_vector(32, 5);
    auto y = x;
    moe::rope_apply(moe::RopeType::neox, 16, cs.data(), y.data());
    EXPECT_EQ(x, y);
    moe::rope_angles(p, 9, cs.data());
    moe::rope_apply(moe::RopeType::normal, 16, cs.data(), y.data());
    for (size_t i = 16; i < 32; ++i) EXPECT_EQ(x[i], y[i]);
}

TEST(Rope, FrequencyFactorsDivideTheAngle) {
    moe::RopeParams p;
    p.n_rot = 8;
    std::vector<float> factors = {1.0f, 2.0f, 4.0f, 8.0f};
    std::vector<float> plain(8), scaled(8);
    moe::rope_angles(p, 5, plain.data());
    p.freq_factors = factors.data();
    moe::rope_angles(p, 5, scaled.data());
    for (size_t i = 0; i < 4; ++i) {
        const double theta = std::atan2(double(plain[2 * i + 1]), double(plain[2 * i]));
        EXPECT_NEAR(std::cos(theta / factors[i]), scaled[2 * i], 1e-5);
    }
}

// rope_angles_finite says whether rope_angles stays finite at the largest
// int32 position: a tiny base or scaling factor that passes as "positive"
// overflows the angles (every logit NaN), a sane one never does.
TEST(Rope, AnglesFiniteExactlyWhenRopeAnglesAre) {
    const float factors[4] = {1.0f, 2.0f, 0.0f, 4.0f};
    const moe::RopeParams sane{128, 1e6f, 0.25f, nullptr};
    const moe::RopeParams cases[] = {
        sane,
        {8, 1.0f, 1.0f, nullptr},
        {2, 1e-45f, 1.0f, nullptr},  // theta_scale overflows, but a single pair never uses it
        {8, 1e-45f, 1.0f, nullptr},  // theta_scale finite, the higher pairs' angles overflow
        {8, 10000.0f, std::numeric_limits<float>::infinity(), nullptr},  // rope.scaling.factor 1e-45
        {8, 10000.0f, 1.0f, factors},                                     // a zero frequency factor
    };
    for (const moe::RopeParams &p : cases) {
        std::vector<float> cs(size_t(p.n_rot));
        moe::rope_angles(p, std::numeric_limits<int32_t>::max(), cs.data());
        const bool finite = std::all_of(cs.begin(), cs.end(), [](float v) { return std::isfinite(v); });
        EXPECT_EQ(moe::rope_angles_finite(p), finite) << p.n_rot << " " << p.freq_base << " " << p.freq_scale;
    }
    EXPECT_TRUE(moe::rope_angles_finite(sane));
    for (size_t i = 3; i < std::size(cases); ++i) EXPECT_FALSE(moe::rope_angles_finite(cases[i])) << i;
}

TEST(Router, SoftmaxSumsToOneAndKeepsOrder) {
    std::vector<float> x = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f};
    moe::softmax(x.data(), int32_t(x.size()));
    double sum = 0;
    for (float v : x) sum += v;
    EXPECT_NEAR(sum, 1.0, 1e-6);
    EXPECT_GT(x[1], x[0]);
    EXPECT_EQ(x[1], x[3]);
    EXPECT_NEAR(x[0] / x[2], std::exp(3.0), 1e-3);
}

TEST(Router, TopKDescendingWithTiesToLowerIndex) {
    const std::vector<float> p = {0.1f, 0.3f, 0.3f, 0.05f, 0.3f, 0.25f};
    int32_t ids[4];
    float w[4];
    moe::top_k(p.data(), int32_t(p.size()), 4, ids, w);
    EXPECT_EQ(ids[0], 1);
    EXPECT_EQ(ids[1], 2);
    EXPECT_EQ(ids[2], 4);
    EXPECT_EQ(ids[3], 5);
    EXPECT_EQ(w[3], 0.25f);
}

TEST(Router, TopKAllEqualPicksFirstIndices) {
    const std::vector<float> p(8, 0.125f);
    int32_t ids[3];
    float w[3];
    moe::top_k(p.data(), 8, 3, ids, w);
    EXPECT_EQ(ids[0], 0);
    EXPECT_EQ(ids[1], 1);
    EXPECT_EQ(ids[2], 2);
}

// silu(g) * u against the formula in double precision, over the range where
// exp(-v) neither overflows nor vanishes and beyond it.
TEST(SwiGlu, WithinFewUlpOfTheFormula) {
    std::vector<float> g, u;
    for (float v = -100.0f; v <= 100.0f; v += 0.0137f) g.push_back(v), u.push_back(1.0f + v * 0.01f);
    for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 88.0f, -88.0f, 1e30f}) g.push_back(v), u.push_back(0.5f);
    std::vector<float> h(g.size());
    moe::swiglu(g.data(), u.data(), h.data(), int64_t(g.size()));
    for (size_t i = 0; i < g.size(); ++i) {
        const double v = g[i], want = v / (1.0 + std::exp(-v)) * double(u[i]);
        // Below gate -87 the exponential is clamped at exp(-87): results under 1e-35 are only near zero.
        EXPECT_NEAR(h[i], want, 4e-7 * std::fabs(want) + 1e-35) << "gate " << g[i];
    }
    const float nan = NAN, one = 1.0f;
    float out;
    moe::swiglu(&nan, &one, &out, 1);
    EXPECT_TRUE(std::isnan(out));
}

// Rows are split into chunks however the threads share them: every element
// must come out the same whatever chunk (and position in it) it falls in.
TEST(SwiGlu, ChunksGiveTheSameBitsAsOneCall) {
    std::mt19937 rng(9);
    std::normal_distribution<float> d(0.0f, 4.0f);
    const size_t n = 1000;
    std::vector<float> g(n), u(n), whole(n), parts(n);
    for (size_t i = 0; i < n; ++i) g[i] = d(rng), u[i] = d(rng);
    moe::swiglu(g.data(), u.data(), whole.data(), int64_t(n));
    for (size_t at = 0; at < n;) {
        const size_t len = std::min(n - at, size_t(1 + rng() % 23));
        moe::swiglu(g.data() + at, u.data() + at, parts.data() + at, int64_t(len));
        at += len;
    }
    EXPECT_EQ(std::memcmp(whole.data(), parts.data(), n * sizeof(float)), 0);
}

// The selection rule spelled out: k passes, each taking the first of the
// largest remaining values (a number before any NaN).
void top_k_by_passes(const std::vector<float> &p, int32_t k, std::vector<int32_t> &ids) {
    ids.clear();
    for (int32_t slot = 0; slot < k; ++slot) {
        int32_t best = -1;
        for (int32_t i = 0; i < int32_t(p.size()); ++i) {
            if (std::find(ids.begin(), ids.end(), i) != ids.end()) continue;
            if (best < 0 || p[size_t(i)] > p[size_t(best)] || (std::isnan(p[size_t(best)]) && !std::isnan(p[size_t(i)])))
                best = i;
        }
        ids.push_back(best);
    }
}

TEST(Router, TopKEqualsSelectionByPassesWithTiesAndNaNs) {
    std::mt19937 rng(5);
    std::uniform_int_distribution<int> level(0, 9), kind(0, 19);
    for (int round = 0; round < 500; ++round) {
        const int32_t n = 1 + round % 130, k = 1 + int32_t(rng() % uint32_t(std::min(n, 16)));
        std::vector<float> p(static_cast<size_t>(n));
        for (float &v : p) {
            const int c = kind(rng);
            v = c == 0 ? NAN : c == 1 ? -INFINITY : c == 2 ? INFINITY : float(level(rng)) * 0.125f;  // many ties
        }
        std::vector<int32_t> want;
        top_k_by_passes(p, k, want);
        std::vector<int32_t> ids(static_cast<size_t>(k), -7);
        std::vector<float> w(static_cast<size_t>(k));
        moe::top_k(p.data(), n, k, ids.data(), w.data());
        ASSERT_EQ(ids, want) << "round " << round;
        for (int32_t s = 0; s < k; ++s) {
            if (std::isnan(p[size_t(want[size_t(s)])])) EXPECT_TRUE(std::isnan(w[size_t(s)]));
            else EXPECT_EQ(w[size_t(s)], p[size_t(want[size_t(s)])]);
        }
    }
}

TEST(Router, RenormalizeDividesBySumClampedAtTinyValue) {
    float w[2] = {0.2f, 0.6f};
    moe::renormalize(w, 2);
    EXPECT_FLOAT_EQ(w[0], 0.25f);
    EXPECT_FLOAT_EQ(w[1], 0.75f);
    float tiny[2] = {1e-6f, 1e-6f};
    moe::renormalize(tiny, 2);
    EXPECT_FLOAT_EQ(tiny[0], 1e-6f / 6.103515625e-5f);
}

// Softmax gating: softmax over all logits, top k of it, optionally
// renormalised; softmax_weight: top k of the raw logits, softmax over those k.
TEST(Router, RouteExpertsFollowsTheGatingRule) {
    const std::vector<float> logits = {0.3f, -1.0f, 2.5f, 0.9f, 2.5f, -0.2f, 1.7f, 0.0f};
    const int32_t n = int32_t(logits.size()), k = 3;
    for (bool norm : {false, true}) {
        auto p = logits;
        std::vector<int32_t> ids(k);
        std::vector<float> w(k);
        moe::GatingSpec spec;
        spec.norm_weights = norm;
        moe::RouterScratch scratch(n, 1);
        moe::route_experts(spec, p.data(), nullptr, n, k, ids.data(), w.data(), scratch);
        EXPECT_EQ(ids, (std::vector<int32_t>{2, 4, 6}));
        double z = 0;
        for (float l : logits) z += std::exp(double(l) - 2.5);
        double sel = 0;
        for (int32_t s = 0; s < k; ++s) sel += std::exp(double(logits[size_t(ids[size_t(s)])]) - 2.5) / z;
        for (int32_t s = 0; s < k; ++s) {
            const double prob = std::exp(double(logits[size_t(ids[size_t(s)])]) - 2.5) / z;
            EXPECT_NEAR(w[size_t(s)], norm ? prob / sel : prob, 1e-6) << s;
        }
    }
    auto p = logits;
    std::vector<int32_t> ids(k);
    std::vector<float> w(k);
    moe::GatingSpec spec;
    spec.func = moe::GatingFunc::softmax_weight;
    moe::RouterScratch scratch(n, 1);
    moe::route_experts(spec, p.data(), nullptr, n, k, ids.data(), w.data(), scratch);
    EXPECT_EQ(ids, (std::vector<int32_t>{2, 4, 6}));
    const double z = 2 * std::exp(0.0) + std::exp(1.7 - 2.5);
    EXPECT_NEAR(w[0], 1 / z, 1e-6);
    EXPECT_NEAR(w[1], 1 / z, 1e-6);
    EXPECT_NEAR(w[2], std::exp(1.7 - 2.5) / z, 1e-6);
}

// With a yarn_log_multiplier (deepseek2) YaRN keeps its angles but cos/sin
// keep magnitude 1: llama.cpp's attn_factor cancels 1 + 0.1 ln(factor).
TEST(Rope, YarnWithUnitMagnitudeKeepsTheAngles) {
    moe::RopeParams scaled;
    scaled.n_rot = 16;
    scaled.freq_scale = 1.0f / 40.0f;
    moe::RopeParams unit = scaled;
    moe::rope_enable_yarn(scaled, 64);
    moe::rope_enable_yarn(unit, 64, true);
    EXPECT_EQ(unit.mscale, 1.0f);
    EXPECT_EQ(unit.ext_factor, 1.0f);
    EXPECT_EQ(unit.yarn_low, scaled.yarn_low);
    EXPECT_EQ(unit.yarn_high, scaled.yarn_high);
    std::vector<float> a(16), b(16);
    for (int32_t pos : {1, 7, 500}) {
        moe::rope_angles(scaled, pos, a.data());
        moe::rope_angles(unit, pos, b.data());
        for (size_t j = 0; j < a.size(); ++j) EXPECT_NEAR(b[j] * scaled.mscale, a[j], 1e-6f) << pos << " " << j;
    }
}

// gpt-oss's clamped SwiGLU against its formula in double: x = min(gate, 7),
// y = clamp(up, -7, 7), h = x sigmoid(1.702 x) (y + 1).
TEST(SwiGluOai, WithinFewUlpOfTheFormula) {
    std::vector<float> g, u;
    for (float v = -60.0f; v <= 60.0f; v += 0.0113f) g.push_back(v), u.push_back(v * 0.2f - 3.0f);
    for (float v : {0.0f, -0.0f, 7.0f, 7.5f, -7.5f, 1e30f, -100.0f}) g.push_back(v), u.push_back(v);
    std::vector<float> h(g.size());
    moe::swiglu_oai(g.data(), u.data(), h.data(), int64_t(g.size()));
    for (size_t i = 0; i < g.size(); ++i) {
        const double alpha = moe::kOaiAlpha;  // the float constant, as the engine multiplies by it
        const double x = std::min(double(g[i]), 7.0), y = std::clamp(double(u[i]), -7.0, 7.0);
        const double want = x / (1.0 + std::exp(-alpha * x)) * (y + 1.0);
        // alpha x is rounded to float before the exponential: |alpha x| half-ulps of relative error.
        // Below alpha x = -87 the exponential is clamped: results under 1e-34 are only near zero.
        const double tol = (4e-7 + 6e-8 * std::fabs(alpha * x)) * std::fabs(want) + 1e-34;
        EXPECT_NEAR(h[i], want, tol) << "gate " << g[i] << " up " << u[i];
    }
}

// Bias rows are added to gate and up before the activation, for either
// activation, and chunks of a row give the same bits as the whole row.
TEST(ExpertActivation, AddsBiasesThenActivates) {
    const size_t n = 301;
    const auto g0 = random_vector(n, 11, 4.0f), u0 = random_vector(n, 12, 4.0f);
    const auto bg = random_vector(n, 13), bu = random_vector(n, 14);
    for (moe::ExpertAct act : {moe::ExpertAct::swiglu, moe::ExpertAct::swiglu_oai}) {
        auto g = g0, u = u0;
        std::vector<float> h(n), want(n), gs(n), us(n), parts(n);
        moe::expert_activation(act, g.data(), u.data(), bg.data(), bu.data(), h.data(), int64_t(n));
        for (size_t i = 0; i < n; ++i) gs[i] = g0[i] + bg[i], us[i] = u0[i] + bu[i];
        EXPECT_EQ(g, gs);
        EXPECT_EQ(u, us);
        (act == moe::ExpertAct::swiglu ? moe::swiglu : moe::swiglu_oai)(gs.data(), us.data(), want.data(), int64_t(n));
        EXPECT_EQ(std::memcmp(h.data(), want.data(), n * sizeof(float)), 0);
        auto g2 = g0, u2 = u0;
        for (size_t at = 0; at < n; at += 37) {
            const int64_t len = int64_t(std::min<size_t>(37, n - at));
            moe::expert_activation(act, g2.data() + at, u2.data() + at, bg.data() + at, bu.data() + at,
                                   parts.data() + at, len);
        }
        EXPECT_EQ(std::memcmp(h.data(), parts.data(), n * sizeof(float)), 0);
        auto g3 = gs, u3 = us;
        moe::expert_activation(act, g3.data(), u3.data(), nullptr, nullptr, parts.data(), int64_t(n));
        EXPECT_EQ(std::memcmp(h.data(), parts.data(), n * sizeof(float)), 0);  // no bias: nothing added
    }
}

// Attention of every head at every position against a direct double loop:
// scores of positions first..pos, softmax with the head's sink (if any) in
// the maximum and the denominator only.
void check_attention(bool f32_cache, double tol, int32_t window = 0, const std::vector<float> &sinks = {}) {
    const int32_t n_head = 4, n_kv = 2, hd = 8, n_ctx = 12, layer = 1;
    moe::KvCache kv(2, n_ctx, n_kv * hd, n_kv * hd, f32_cache);
    std::vector<std::vector<float>> keys, values;
    for (int32_t p = 0; p < n_ctx; ++p) {
        keys.push_back(random_vector(size_t(n_kv * hd), uint32_t(100 + p)));
        values.push_back(random_vector(size_t(n_kv * hd), uint32_t(200 + p)));
        kv.store(layer, p, keys.back().data(), values.back().data());
    }
    moe::AttentionShape s{n_head, n_kv, hd, hd, 1.0f / std::sqrt(float(hd))};
    std::vector<float> scores(static_cast<size_t>(n_ctx)), out(static_cast<size_t>(hd));
    for (int32_t pos : {0, 5, n_ctx - 1}) {
        for (int32_t h = 0; h < n_head; ++h) {
            auto q = random_vector(size_t(hd), uint32_t(300 + pos * 10 + h));
            const int32_t first = window > 0 ? std::max(0, pos - window + 1) : 0;
            const float *sink = sinks.empty() ? nullptr : &sinks[size_t(h)];
            moe::attend_head(kv, layer, s, h, q.data(), pos, scores.data(), out.data(), {first, sink});
            const int32_t g = h / (n_head / n_kv);
            std::vector<double> sc(size_t(pos + 1), -INFINITY);
            double max = sink ? double(*sink) : -1e300;
            for (int32_t j = 0; j <= pos; ++j) {
                if (window > 0 && pos - j >= window) continue;  // masked
                double d = 0;
                for (int32_t i = 0; i < hd; ++i) d += double(q[size_t(i)]) * keys[size_t(j)][size_t(g * hd + i)];
                sc[size_t(j)] = d / std::sqrt(double(hd));
                max = std::max(max, sc[size_t(j)]);
            }
            double sum = sink ? std::exp(double(*sink) - max) : 0.0;
            for (double &v : sc) sum += (v = std::exp(v - max));
            for (int32_t i = 0; i < hd; ++i) {
                double o = 0;
                for (int32_t j = 0; j <= pos; ++j) o += sc[size_t(j)] / sum * values[size_t(j)][size_t(g * hd + i)];
                EXPECT_NEAR(out[size_t(i)], o, tol) << "pos " << pos << " head " << h << " dim " << i;
            }
        }
    }
}

TEST(Attention, MatchesNaiveLoopWithF32Cache) { check_attention(true, 1e-5); }
TEST(Attention, MatchesNaiveLoopWithF16Cache) { check_attention(false, 5e-3); }
TEST(Attention, SlidingWindowMasksKeysWindowOrMoreBack) {
    check_attention(true, 1e-5, 3);
    check_attention(true, 1e-5, 1);  // only the query's own position
}
TEST(Attention, SinksJoinMaxAndDenominatorOnly) {
    check_attention(true, 1e-5, 0, {-1.0f, 0.5f, 3.0f, 20.0f});  // 20: above every score
    check_attention(true, 1e-5, 4, {2.0f, -3.0f, 0.0f, 1.0f});
}

// The layers a sliding-window pattern covers: within each group of
// `pattern` layers, all but the last.
TEST(SlidingWindow, PatternLeavesTheLastLayerOfEachGroupFull) {
    moe::HParams hp;
    EXPECT_FALSE(hp.is_swa(0));  // no window
    hp.swa_layers = moe::swa_layers_of_period(8, 2);
    EXPECT_FALSE(hp.is_swa(0));  // still no window: n_swa is 0
    hp.n_swa = 128;
    for (int32_t l = 0; l < 8; ++l) EXPECT_EQ(hp.is_swa(l), l % 2 == 0) << l;
    hp.swa_layers = moe::swa_layers_of_period(8, 4);
    for (int32_t l = 0; l < 8; ++l) EXPECT_EQ(hp.is_swa(l), l % 4 != 3) << l;
    hp.swa_layers = moe::swa_layers_of_period(8, 0);  // 0: every layer slides
    for (int32_t l = 0; l < 8; ++l) EXPECT_TRUE(hp.is_swa(l)) << l;
    hp.swa_layers = moe::swa_layers_of_period(8, 1);  // 1: none does
    for (int32_t l = 0; l < 8; ++l) EXPECT_FALSE(hp.is_swa(l)) << l;
}

// YaRN against its formula in double: angle mixed between the interpolated
// and the original one by a ramp over the correction dims, cos/sin scaled by
// 1 + 0.1 ln(factor).
TEST(Rope, YarnMatchesTheFormula) {
    const int32_t n_rot = 64, n_ctx_orig = 4096;
    const double base = 150000.0, factor = 32.0;
    moe::RopeParams p;
    p.n_rot = n_rot;
    p.freq_base = float(base);
    p.freq_scale = float(1.0 / factor);
    moe::rope_enable_yarn(p, n_ctx_orig);
    const auto corr = [&](double beta) { return n_rot * std::log(n_ctx_orig / (beta * 2 * M_PI)) / (2 * std::log(base)); };
    const double low = std::max(0.0, std::floor(corr(32))), high = std::min(double(n_rot - 1), std::ceil(corr(1)));
    EXPECT_EQ(p.yarn_low, float(low));
    EXPECT_EQ(p.yarn_high, float(high));
    const double mscale = 1.0 + 0.1 * std::log(factor);
    std::vector<float> cs(static_cast<size_t>(n_rot));
    for (int32_t pos : {0, 1, 5, 127, 3000}) {
        moe::rope_angles(p, pos, cs.data());
        for (int32_t i = 0; i < n_rot / 2; ++i) {
            const double extrap = pos * std::pow(base, -2.0 * i / n_rot);
            const double ramp = 1.0 - std::clamp((i - low) / std::max(0.001, high - low), 0.0, 1.0);
            const double theta = extrap / factor * (1 - ramp) + extrap * ramp;
            const double tol = 2e-6 * (1 + std::fabs(theta));
            EXPECT_NEAR(cs[size_t(2 * i)], std::cos(theta) * mscale, tol) << pos << " " << i;
            EXPECT_NEAR(cs[size_t(2 * i + 1)], std::sin(theta) * mscale, tol) << pos << " " << i;
        }
    }
}

// A YaRN factor of at most 1 still mixes the angles (freq_scale 1/factor
// on the interpolated part) but leaves cos/sin unscaled, as llama.cpp's
// get_mscale does: 1 + 0.1 ln(factor) would shrink them below 1 (and to 0 or
// negative for a factor at or below e^-10).
TEST(Rope, YarnFactorAtMostOneDoesNotScale) {
    for (const double factor : {0.5, 1.0, 1e-5}) {
        moe::RopeParams p;
        p.n_rot = 16;
        p.freq_base = 10000.0f;
        p.freq_scale = float(1.0 / factor);
        moe::rope_enable_yarn(p, 4096);
        EXPECT_EQ(p.mscale, 1.0f) << factor;
        std::vector<float> cs(16);
        for (int32_t pos : {1, 7, 40}) {
            moe::rope_angles(p, pos, cs.data());
            for (int32_t i = 0; i < 8; ++i)
                EXPECT_NEAR(std::hypot(cs[size_t(2 * i)], cs[size_t(2 * i + 1)]), 1.0, 1e-6) << factor << " " << pos;
        }
    }
}

}  // namespace
