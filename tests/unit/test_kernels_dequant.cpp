// Dequantisation and element conversions against straightforward per-element
// formulas written from the block layout tables.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "common/error.hpp"
#include "kernels/kernels.hpp"
#include "support/kernel_data.hpp"

using moe::GgmlType;
namespace k = moe::kernels;

namespace {

uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
float h(const uint8_t *p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return k::fp16_to_f32(v);
}
int nib(const uint8_t *qs, int i) { return i < 16 ? qs[i] & 15 : qs[i - 16] >> 4; }
constexpr int kLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
int bit5(const uint8_t *qh, int i) { return (qh[i / 8] >> (i % 8)) & 1; }

void k_scale(const uint8_t *q, int j, int &sc, int &m) {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// Element i of a block, from the layout description.
float element(GgmlType t, const uint8_t *b, int i) {
    switch (t) {
    case GgmlType::Q4_0: return static_cast<float>(nib(b + 2, i) - 8) * h(b);
    case GgmlType::Q4_1: return static_cast<float>(nib(b + 4, i)) * h(b) + h(b + 2);
    case GgmlType::Q5_0: return static_cast<float>((nib(b + 6, i) | bit5(b + 2, i) << 4) - 16) * h(b);
    case GgmlType::Q5_1: return static_cast<float>(nib(b + 8, i) | bit5(b + 4, i) << 4) * h(b) + h(b + 2);
    case GgmlType::Q8_0: return static_cast<float>(static_cast<int8_t>(b[2 + i])) * h(b);
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: {
        const bool five = t == GgmlType::Q5_K;
        const uint8_t *qs = b + (five ? 48 : 16);
        const int sub = i / 32, l = i % 32, pair = sub / 2;
        int q = (sub % 2 == 0) ? (qs[32 * pair + l] & 15) : (qs[32 * pair + l] >> 4);
        if (five) q |= ((b[16 + l] >> sub) & 1) << 4;
        int sc, m;
        k_scale(b + 4, sub, sc, m);
        return (h(b) * static_cast<float>(sc)) * static_cast<float>(q) - h(b + 2) * static_cast<float>(m);
    }
    case GgmlType::Q6_K: {
        const int half = i / 128, r = i % 128, quarter = r / 32, l = r % 32;
        const uint8_t *ql = b + 64 * half, *qh = b + 128 + 32 * half;
        const int low = quarter == 0 ? ql[l] & 15 : quarter == 1 ? ql[l + 32] & 15 : quarter == 2 ? ql[l] >> 4 : ql[l + 32] >> 4;
        const int high = (qh[l] >> (2 * quarter)) & 3;
        const int8_t sc = static_cast<int8_t>(b[192 + i / 16]);
        return (h(b + 208) * static_cast<float>(sc)) * static_cast<float>((low | high << 4) - 32);
    }
    case GgmlType::Q2_K: {
        // Element 128n + 32j + l: bits 2j of quant byte 32n + l, scale byte 8n + 2j + l/16.
        const int n = i / 128, j = (i % 128) / 32, l = i % 32;
        const int q = (b[16 + 32 * n + l] >> (2 * j)) & 3;
        const int sc = b[8 * n + 2 * j + l / 16];
        return (h(b + 80) * static_cast<float>(sc & 15)) * static_cast<float>(q) - h(b + 82) * static_cast<float>(sc >> 4);
    }
    case GgmlType::Q3_K: {
        const int n = i / 128, j = (i % 128) / 32, l = i % 32, g = 8 * n + 2 * j + l / 16;
        const int q = ((b[32 + 32 * n + l] >> (2 * j)) & 3) - (((b[l] >> (4 * n + j)) & 1) ? 0 : 4);
        const uint8_t *sb = b + 96;
        const int low4 = g < 8 ? sb[g] & 15 : sb[g - 8] >> 4;
        const int s = (low4 | ((sb[8 + g % 4] >> (2 * (g / 4))) & 3) << 4) - 32;
        return (h(b + 108) * static_cast<float>(s)) * static_cast<float>(q);
    }
    case GgmlType::IQ4_NL: return h(b) * static_cast<float>(kLevels[nib(b + 2, i)]);
    case GgmlType::IQ4_XS: {
        const int ib = i / 32;
        const int hi = (b[2] | b[3] << 8) >> (2 * ib) & 3;
        const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 15) | hi << 4;
        return (h(b) * static_cast<float>(ls - 32)) * static_cast<float>(kLevels[nib(b + 8 + 16 * ib, i % 32)]);
    }
    case GgmlType::MXFP4: {
        // e2m1 nibble: sign bit 3, exponent bits 1-2, mantissa bit 0; value
        // doubled so that the scale is 2^(e-128).
        static const float kE2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
        const int q = nib(b + 1, i);
        const float m = 2.0f * kE2m1[q & 7];
        const float v = (q & 8) ? 0.0f - m : m;  // nibble 8 is +0
        return v * std::ldexp(1.0f, int(b[0]) - 128);
    }
    case GgmlType::F32: {
        float f;
        std::memcpy(&f, b, 4);
        return f;
    }
    case GgmlType::F16: return h(b);
    case GgmlType::BF16: {
        uint16_t v;
        std::memcpy(&v, b, 2);
        return k::bf16_to_f32(v);
    }
    default: ADD_FAILURE() << "type"; return 0;
    }
}

class Dequant : public ::testing::TestWithParam<GgmlType> {};

TEST_P(Dequant, MatchesPerElementFormulaBitForBit) {
    const GgmlType t = GetParam();
    const auto &tr = moe::type_traits(t);
    std::mt19937 rng(1234 + static_cast<int>(t));
    const int64_t n = 256 * 12;
    const auto row = moe::test::random_row(t, n, rng);
    std::vector<float> out(n);
    k::dequantize_row(t, row.data(), out.data(), n);
    for (int64_t i = 0; i < n; ++i) {
        const uint8_t *block = row.data() + (i / tr.block_elems) * tr.block_bytes;
        const float want = element(t, block, static_cast<int>(i % tr.block_elems));
        ASSERT_EQ(bits(out[i]), bits(want)) << tr.name << " element " << i << ": " << out[i] << " vs " << want;
    }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, Dequant, ::testing::ValuesIn(moe::test::compute_weight_types()),
                         [](const auto &info) { return std::string(moe::type_traits(info.param).name); });

TEST(Dequant, RejectsUnsupportedTypeAndRaggedLength) {
    std::vector<uint8_t> raw(1024);
    std::vector<float> out(512);
    EXPECT_THROW(k::dequantize_row(static_cast<GgmlType>(16), raw.data(), out.data(), 256), moe::Error);  // iq2_xxs
    EXPECT_THROW(k::dequantize_row(GgmlType::Q4_0, raw.data(), out.data(), 33), moe::Error);
}

TEST(Fp16, EveryHalfRoundTrips) {
    for (uint32_t v = 0; v < 65536; ++v) {
        const uint16_t hv = static_cast<uint16_t>(v);
        const float f = k::fp16_to_f32(hv);
        if (std::isnan(f)) {
            EXPECT_TRUE(std::isnan(k::fp16_to_f32(k::f32_to_fp16(f))));
            continue;
        }
        ASSERT_EQ(k::f32_to_fp16(f), hv) << std::hex << v;
    }
    EXPECT_EQ(k::fp16_to_f32(0x3c00), 1.0f);
    EXPECT_EQ(k::fp16_to_f32(0x0001), std::ldexp(1.0f, -24));
    EXPECT_EQ(k::fp16_to_f32(0xfbff), -65504.0f);
}

// Rounding to nearest, ties to even, overflow to infinity.
TEST(Fp16, RoundsToNearestEven) {
    std::mt19937 rng(7);
    std::uniform_int_distribution<uint32_t> any;
    for (int i = 0; i < 200000; ++i) {
        uint32_t u = any(rng);
        if (i % 2) u = (u & 0x80000000u) | (0x30000000u + u % 0x18000000u);  // focus on the half range
        float x;
        std::memcpy(&x, &u, 4);
        if (std::isnan(x)) continue;
        const uint16_t r = k::f32_to_fp16(x);
        const double got = k::fp16_to_f32(r);
        if (std::fabs(x) >= 65520.0f) {
            ASSERT_TRUE(std::isinf(got)) << x;
            continue;
        }
        // Neighbours in magnitude.
        const uint16_t mag = r & 0x7fff;
        const double below = mag ? std::fabs(k::fp16_to_f32(static_cast<uint16_t>(mag - 1))) : 0.0;
        const double above = mag < 0x7bff ? std::fabs(k::fp16_to_f32(static_cast<uint16_t>(mag + 1))) : INFINITY;
        const double ax = std::fabs(static_cast<double>(x)), ag = std::fabs(got);
        ASSERT_LE(std::fabs(ax - ag), std::fabs(ax - below)) << x;
        ASSERT_LE(std::fabs(ax - ag), std::fabs(ax - above)) << x;
        if (std::fabs(ax - ag) == std::fabs(ax - below) || std::fabs(ax - ag) == std::fabs(ax - above))
            ASSERT_EQ(mag & 1, 0) << "tie not to even: " << x;
    }
    EXPECT_EQ(k::f32_to_fp16(65519.0f), 0x7bff);
    EXPECT_EQ(k::f32_to_fp16(65520.0f), 0x7c00);
    EXPECT_EQ(k::f32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie between 0 and the smallest subnormal
    EXPECT_EQ(k::f32_to_fp16(std::ldexp(1.5f, -25)), 0x0001);
    EXPECT_EQ(k::f32_to_fp16(-0.0f), 0x8000);
}

TEST(Bf16, RoundsToNearestEvenAndKeepsNaN) {
    EXPECT_EQ(k::f32_to_bf16(1.0f), 0x3f80);
    float x;
    uint32_t u = 0x3f808000u;  // exactly halfway between 0x3f80 and 0x3f81: even is 0x3f80
    std::memcpy(&x, &u, 4);
    EXPECT_EQ(k::f32_to_bf16(x), 0x3f80);
    u = 0x3f818000u;  // halfway between 0x3f81 and 0x3f82: even is 0x3f82
    std::memcpy(&x, &u, 4);
    EXPECT_EQ(k::f32_to_bf16(x), 0x3f82);
    u = 0x3f808001u;
    std::memcpy(&x, &u, 4);
    EXPECT_EQ(k::f32_to_bf16(x), 0x3f81);
    EXPECT_TRUE(std::isnan(k::bf16_to_f32(k::f32_to_bf16(std::nanf("")))));
    u = 0x7f800001u;  // signalling NaN whose payload sits in the dropped bits
    std::memcpy(&x, &u, 4);
    EXPECT_TRUE(std::isnan(k::bf16_to_f32(k::f32_to_bf16(x))));
    EXPECT_EQ(k::bf16_to_f32(0xc040), -3.0f);
}

}  // namespace
