// Dot products, activation quantisation, matvec/matmat consistency and
// cross-ISA identity.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "common/error.hpp"
#include "kernels/kernels.hpp"
#include "support/kernel_data.hpp"

using moe::GgmlType;
namespace k = moe::kernels;
using moe::test::IsaGuard;
using moe::test::KernelCase;
using moe::test::supported_isas;

namespace {

float h(const uint8_t *p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return k::fp16_to_f32(v);
}

// Dequantised activations (for Q8_1 the block's s is returned separately,
// because the kernels use it as stored).
std::vector<double> act_values(GgmlType at, const std::vector<uint8_t> &a, int64_t n) {
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        switch (at) {
        case GgmlType::F32: {
            float f;
            std::memcpy(&f, a.data() + 4 * i, 4);
            v[i] = f;
            break;
        }
        case GgmlType::F16: v[i] = h(a.data() + 2 * i); break;
        case GgmlType::BF16: {
            uint16_t b;
            std::memcpy(&b, a.data() + 2 * i, 2);
            v[i] = k::bf16_to_f32(b);
            break;
        }
        case GgmlType::Q8_0: {
            const uint8_t *b = a.data() + (i / 32) * 34;
            v[i] = static_cast<double>(h(b)) * static_cast<int8_t>(b[2 + i % 32]);
            break;
        }
        case GgmlType::Q8_1: {
            const uint8_t *b = a.data() + (i / 32) * 36;
            v[i] = static_cast<double>(h(b)) * static_cast<int8_t>(b[4 + i % 32]);
            break;
        }
        case GgmlType::Q8_K: {
            const uint8_t *b = a.data() + (i / 256) * 292;
            float d;
            std::memcpy(&d, b, 4);
            v[i] = static_cast<double>(d) * static_cast<int8_t>(b[4 + i % 256]);
            break;
        }
        default: ADD_FAILURE();
        }
    }
    return v;
}

std::vector<KernelCase> cases() {
    return moe::test::kernel_cases([](int64_t block_elems) -> std::vector<int64_t> {
        if (block_elems == 1) return {7, 1000};
        if (block_elems == 32) return {32 * 9, 2048};
        return {256 * 3, 256 * 16};
    });
}

class Dot : public ::testing::TestWithParam<KernelCase> {};

TEST_P(Dot, QuantisedDotMatchesF64OfDequantisedOperands) {
    const auto [t, n] = GetParam();
    std::mt19937 rng(99 + static_cast<int>(t) + static_cast<int>(n));
    IsaGuard guard;
    for (int rep = 0; rep < 8; ++rep) {
        const auto w = moe::test::random_row(t, n, rng);
        const auto x = moe::test::random_floats(n, rng, rep == 0 ? 1e-3f : 1.0f);
        std::vector<uint8_t> a(k::act_row_bytes(t, n, false));
        k::quantize_act(t, x.data(), a.data(), n, false);
        const GgmlType at = k::act_type(t, false);
        const auto av = act_values(at, a, n);
        std::vector<float> wv(n);
        k::dequantize_row(t, w.data(), wv.data(), n);
        double ref = 0, mag = 0;
        for (int64_t i = 0; i < n; ++i) {
            ref += wv[i] * av[i];
            mag += std::fabs(wv[i] * av[i]);
        }
        if (at == GgmlType::Q8_1) {
            // Q4_1/Q5_1: the min times the stored block sum s replaces m * sum(d*q).
            const size_t wb = moe::type_traits(t).block_bytes;
            for (int64_t b = 0; b < n / 32; ++b) {
                const double m = h(w.data() + b * wb + 2), s = h(a.data() + b * 36 + 2);
                double exact_min = 0;
                for (int j = 0; j < 32; ++j) exact_min += m * av[b * 32 + j];
                ref += m * s - exact_min;
                mag += std::fabs(m * s);
            }
        }
        for (k::Isa isa : supported_isas()) {
            ASSERT_TRUE(k::set_isa(isa));
            const double got = k::dot(t, n, w.data(), a.data(), false);
            EXPECT_NEAR(got, ref, 2e-6 * mag + 1e-30) << k::isa_name(isa) << " rep " << rep;
        }
    }
}

TEST_P(Dot, ExactModeMatchesF64OfDequantisedWeights) {
    const auto [t, n] = GetParam();
    std::mt19937 rng(7 + static_cast<int>(t));
    const auto w = moe::test::random_row(t, n, rng);
    const auto x = moe::test::random_floats(n, rng);
    ASSERT_EQ(k::act_type(t, true), GgmlType::F32);
    ASSERT_EQ(k::act_row_bytes(t, n, true), static_cast<size_t>(n) * 4);
    std::vector<float> a(n);
    k::quantize_act(t, x.data(), a.data(), n, true);
    ASSERT_EQ(std::memcmp(a.data(), x.data(), n * 4), 0);
    std::vector<float> wv(n);
    k::dequantize_row(t, w.data(), wv.data(), n);
    double ref = 0, mag = 0;
    for (int64_t i = 0; i < n; ++i) {
        ref += static_cast<double>(wv[i]) * x[i];
        mag += std::fabs(static_cast<double>(wv[i]) * x[i]);
    }
    EXPECT_NEAR(k::dot(t, n, w.data(), a.data(), true), ref, 2e-6 * mag + 1e-30);
}

// matvec is the per-row dot; matmat is matvec per token; every ISA gives the
// scalar result bit for bit.
TEST_P(Dot, MatvecMatmatAndIsasAgreeExactly) {
    const auto [t, n] = GetParam();
    std::mt19937 rng(5 + static_cast<int>(t));
    const int64_t rows = 13;
    const int32_t tokens = 5;
    const size_t rb = moe::row_bytes(t, n);
    const std::vector<uint8_t> w = moe::test::random_rows(t, n, rows, rng);
    IsaGuard guard;
    for (bool exact : {false, true}) {
        const size_t ab = k::act_row_bytes(t, n, exact) + 8;  // padded stride
        std::vector<uint8_t> acts(ab * tokens);
        for (int32_t tk = 0; tk < tokens; ++tk) {
            const auto x = moe::test::random_floats(n, rng);
            k::quantize_act(t, x.data(), acts.data() + tk * ab, n, exact);
        }
        std::vector<float> reference;  // scalar per-row dots, [token][row]
        for (k::Isa isa : supported_isas()) {
            ASSERT_TRUE(k::set_isa(isa));
            std::vector<float> by_dot(rows * tokens), by_matvec(rows * tokens, NAN), by_matmat(rows * tokens, NAN);
            for (int32_t tk = 0; tk < tokens; ++tk)
                for (int64_t r = 0; r < rows; ++r)
                    by_dot[tk * rows + r] = k::dot(t, n, w.data() + r * rb, acts.data() + tk * ab, exact);
            for (int32_t tk = 0; tk < tokens; ++tk) {
                k::matvec_rows(t, n, w.data(), rb, acts.data() + tk * ab, by_matvec.data() + tk * rows, 0, 4, exact);
                k::matvec_rows(t, n, w.data(), rb, acts.data() + tk * ab, by_matvec.data() + tk * rows + 4, 4, rows,
                               exact);
            }
            k::matmat_rows(t, n, w.data(), rb, acts.data(), ab, tokens, by_matmat.data(), rows, 0, 6, exact);
            k::matmat_rows(t, n, w.data(), rb, acts.data(), ab, tokens, by_matmat.data(), rows, 6, rows, exact);
            ASSERT_EQ(std::memcmp(by_dot.data(), by_matvec.data(), by_dot.size() * 4), 0) << k::isa_name(isa);
            ASSERT_EQ(std::memcmp(by_dot.data(), by_matmat.data(), by_dot.size() * 4), 0) << k::isa_name(isa);
            if (reference.empty()) reference = by_dot;
            ASSERT_EQ(std::memcmp(reference.data(), by_dot.data(), by_dot.size() * 4), 0)
                << k::isa_name(isa) << " differs from scalar, exact=" << exact;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, Dot, ::testing::ValuesIn(cases()), moe::test::kernel_case_name);

// Every MXFP4 exponent byte, 0 to 255, as the scale of a whole row (a full
// group of eight blocks and a tail of three): the SIMD kernels build the
// scales 2^(e - 128) from the exponent bits, with the f32 subnormals at
// e = 0, 1 and 2^127 at 255, which random rows (exponents 0..2 and 108..131)
// do not reach. Activations of the smallest fp16 scales keep the largest
// products finite.
TEST(Mxfp4, EveryExponentByteEqualsScalar) {
    const GgmlType t = GgmlType::MXFP4;
    const int64_t n = 32 * 11, rows = 256;
    const size_t rb = moe::row_bytes(t, n);
    std::mt19937 rng(39);
    std::vector<uint8_t> w = moe::test::random_rows(t, n, rows, rng);
    for (int64_t r = 0; r < rows; ++r)
        for (size_t off = 0; off < rb; off += 17) w[r * rb + off] = static_cast<uint8_t>(r);
    std::vector<float> x = moe::test::random_floats(n, rng, 1e-6f);
    x[5] = 1.5e-5f;  // amax: the activation scale about 2^-23, an fp16 subnormal
    std::vector<uint8_t> act(k::act_row_bytes(t, n, false));
    k::quantize_act(t, x.data(), act.data(), n, false);
    IsaGuard guard;
    std::vector<float> reference;
    for (k::Isa isa : supported_isas()) {
        ASSERT_TRUE(k::set_isa(isa));
        std::vector<float> y(rows);
        k::matvec_rows(t, n, w.data(), rb, act.data(), y.data(), 0, rows, false);
        for (int64_t r = 0; r < rows; ++r) ASSERT_TRUE(std::isfinite(y[r])) << "exponent " << r;
        if (reference.empty()) {
            reference = y;
            continue;
        }
        for (int64_t r = 0; r < rows; ++r)
            ASSERT_EQ(std::memcmp(&reference[r], &y[r], 4), 0)
                << k::isa_name(isa) << " exponent " << r << ": " << y[r] << " vs " << reference[r];
    }
}

// --- activation quantisation rounding rules -------------------------------------

TEST(QuantizeAct, Q8_0RoundsHalfToEvenWithScaleFromAmax) {
    std::vector<float> x(32, 0.0f);
    x[0] = 127.0f;  // amax = 127: d = 1, multiplier 1
    x[1] = 2.5f;
    x[2] = 3.5f;
    x[3] = -2.5f;
    x[4] = -0.5f;
    x[5] = 126.5f;
    std::vector<uint8_t> a(34);
    k::quantize_act(GgmlType::Q8_0, x.data(), a.data(), 32, false);
    EXPECT_EQ(h(a.data()), 1.0f);
    const int8_t *q = reinterpret_cast<const int8_t *>(a.data() + 2);
    EXPECT_EQ(q[0], 127);
    EXPECT_EQ(q[1], 2);
    EXPECT_EQ(q[2], 4);
    EXPECT_EQ(q[3], -2);
    EXPECT_EQ(q[4], 0);
    EXPECT_EQ(q[5], 126);

    std::vector<float> zeros(32, 0.0f);
    k::quantize_act(GgmlType::Q8_0, zeros.data(), a.data(), 32, false);
    EXPECT_EQ(h(a.data()), 0.0f);
    for (int j = 0; j < 32; ++j) EXPECT_EQ(q[j], 0);
}

TEST(QuantizeAct, Q8_0ScaleIsFp16OfAmaxOver127) {
    std::mt19937 rng(3);
    const auto x = moe::test::random_floats(64, rng);
    std::vector<uint8_t> a(68);
    k::quantize_act(GgmlType::Q4_0, x.data(), a.data(), 64, false);
    for (int b = 0; b < 2; ++b) {
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
        uint16_t stored;
        std::memcpy(&stored, a.data() + b * 34, 2);
        EXPECT_EQ(stored, k::f32_to_fp16(amax / 127.0f));
        for (int j = 0; j < 32; ++j)
            EXPECT_EQ(static_cast<int8_t>(a[b * 34 + 2 + j]), static_cast<int>(std::nearbyint(x[b * 32 + j] * (127.0f / amax))));
    }
}

TEST(QuantizeAct, Q8_1StoresScaledSum) {
    std::mt19937 rng(4);
    const auto x = moe::test::random_floats(32, rng);
    std::vector<uint8_t> a(36);
    k::quantize_act(GgmlType::Q5_1, x.data(), a.data(), 32, false);
    ASSERT_EQ(k::act_type(GgmlType::Q5_1, false), GgmlType::Q8_1);
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += static_cast<int8_t>(a[4 + j]);
    uint16_t s;
    std::memcpy(&s, a.data() + 2, 2);
    EXPECT_EQ(s, k::f32_to_fp16((amax / 127.0f) * static_cast<float>(sum)));
}

TEST(QuantizeAct, Q8_KMapsFirstLargestToMinus127) {
    std::vector<float> x(256, 0.0f);
    x[3] = 5.0f;
    x[7] = -5.0f;  // same magnitude, later: x[3] decides the sign
    x[8] = 2.5f;
    x[20] = -1.0f;
    std::vector<uint8_t> a(292);
    k::quantize_act(GgmlType::Q4_K, x.data(), a.data(), 256, false);
    float d;
    std::memcpy(&d, a.data(), 4);
    EXPECT_EQ(d, 1.0f / (-127.0f / 5.0f));
    EXPECT_LT(d, 0.0f);
    const int8_t *q = reinterpret_cast<const int8_t *>(a.data() + 4);
    EXPECT_EQ(q[3], -127);
    EXPECT_EQ(q[7], 127);
    EXPECT_EQ(q[8], static_cast<int>(std::nearbyint(-127.0f / 5.0f * 2.5f)));
    int16_t bsums[16];
    std::memcpy(bsums, a.data() + 260, 32);
    EXPECT_EQ(bsums[0], q[3] + q[7] + q[8]);
    EXPECT_EQ(bsums[1], q[20]);
    for (int g = 2; g < 16; ++g) EXPECT_EQ(bsums[g], 0);

    // Half-way products round to even: max = -127 gives multiplier 1.
    std::fill(x.begin(), x.end(), 0.0f);
    x[0] = -127.0f;
    x[1] = 0.5f;
    x[2] = 1.5f;
    x[3] = -2.5f;
    k::quantize_act(GgmlType::Q6_K, x.data(), a.data(), 256, false);
    std::memcpy(&d, a.data(), 4);
    EXPECT_EQ(d, 1.0f);
    EXPECT_EQ(q[0], -127);
    EXPECT_EQ(q[1], 0);
    EXPECT_EQ(q[2], 2);
    EXPECT_EQ(q[3], -2);

    std::fill(x.begin(), x.end(), 0.0f);
    k::quantize_act(GgmlType::Q5_K, x.data(), a.data(), 256, false);
    std::memcpy(&d, a.data(), 4);
    EXPECT_EQ(d, 0.0f);
    std::memcpy(bsums, a.data() + 260, 32);
    for (int g = 0; g < 16; ++g) EXPECT_EQ(bsums[g], 0);
}

TEST(QuantizeAct, FloatFormatsRoundPerElement) {
    std::mt19937 rng(8);
    const auto x = moe::test::random_floats(100, rng);
    std::vector<uint16_t> a(100);
    k::quantize_act(GgmlType::F16, x.data(), a.data(), 100, false);
    for (int i = 0; i < 100; ++i) EXPECT_EQ(a[i], k::f32_to_fp16(x[i]));
    k::quantize_act(GgmlType::BF16, x.data(), a.data(), 100, false);
    for (int i = 0; i < 100; ++i) EXPECT_EQ(a[i], k::f32_to_bf16(x[i]));
}

TEST(Kernels, UnsupportedWeightTypesAreRejected) {
    std::vector<uint8_t> w(1024), a(1024);
    const GgmlType iq2_xxs = static_cast<GgmlType>(16);  // a known layout without kernels
    EXPECT_THROW(k::act_type(iq2_xxs, false), moe::Error);
    EXPECT_THROW(k::dot(iq2_xxs, 256, w.data(), a.data(), false), moe::Error);
    EXPECT_THROW(k::dot(GgmlType::Q4_0, 31, w.data(), a.data(), false), moe::Error);
}

TEST(Kernels, IsaOverrideIsClampedToTheCpu) {
    IsaGuard guard;
    EXPECT_TRUE(k::set_isa(k::Isa::scalar));
    EXPECT_EQ(k::active_isa(), k::Isa::scalar);
    EXPECT_STREQ(k::isa_name(k::Isa::avx512), "avx512");
}

}  // namespace
