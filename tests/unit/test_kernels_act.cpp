// Activation conversion gives the same bytes on every ISA this CPU has.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/kernels.hpp"
#include "support/kernel_data.hpp"

using moe::GgmlType;
namespace k = moe::kernels;
using moe::test::IsaGuard;

namespace {

// Rows with the cases the rounding rules care about: all-zero blocks, exact
// halves after scaling, repeated maxima of both signs, tiny and huge values.
std::vector<std::vector<float>> rows(int64_t n, std::mt19937 &rng) {
    std::vector<std::vector<float>> out;
    out.push_back(moe::test::random_floats(n, rng));
    out.push_back(moe::test::random_floats(n, rng, 1e-30f));
    out.push_back(moe::test::random_floats(n, rng, 1e30f));
    std::vector<float> ties(static_cast<size_t>(n));
    std::uniform_int_distribution<int> half_steps(-254, 254);
    for (int64_t i = 0; i < n; ++i) ties[i] = static_cast<float>(half_steps(rng)) * 0.5f;
    for (int64_t i = 0; i < n; i += 32) ties[i] = (i / 32) % 2 ? 127.0f : -127.0f;  // multiplier 1
    out.push_back(ties);
    std::vector<float> signs(static_cast<size_t>(n), 0.0f);
    for (int64_t i = 64; i < n; i += 7) signs[i] = (i % 2) ? 3.0f : -3.0f;  // ties of |max|; first block zero
    out.push_back(signs);
    return out;
}

TEST(QuantizeActIsas, EveryIsaGivesTheScalarBytes) {
    IsaGuard guard;
    std::mt19937 rng(17);
    const int64_t n = 256 * 5;
    for (GgmlType w : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q4_K, GgmlType::F16, GgmlType::BF16}) {
        const size_t bytes = k::act_row_bytes(w, n, false);
        for (const auto &x : rows(n, rng)) {
            ASSERT_TRUE(k::set_isa(k::Isa::scalar));
            std::vector<uint8_t> ref(bytes);
            k::quantize_act(w, x.data(), ref.data(), n, false);
            for (k::Isa isa : {k::Isa::avx2, k::Isa::avx512}) {
                if (!k::set_isa(isa)) continue;
                std::vector<uint8_t> got(bytes, 0xAA);
                k::quantize_act(w, x.data(), got.data(), n, false);
                ASSERT_EQ(std::memcmp(ref.data(), got.data(), bytes), 0)
                    << k::isa_name(isa) << " " << moe::type_traits(w).name;
            }
        }
    }
}

// Every class of float: random bit patterns (NaNs with payloads, infinities,
// subnormals of both formats) plus the values where f16 rounding turns:
// ties to even, the overflow threshold, the smallest subnormal and half of it.
TEST(HalfRows, EveryIsaConvertsLikeTheScalarConversion) {
    IsaGuard guard;
    std::mt19937 rng(23);
    std::vector<float> x;
    for (float v : {0.0f, -0.0f, 65504.0f, 65519.996f, 65520.0f, -65520.0f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f,
                    0x1p-26f, 0x1.ffcp-15f, 0x1.002p+0f, 0x1.006p+0f, 1e-40f, INFINITY, -INFINITY, NAN})
        x.push_back(v);
    std::uniform_int_distribution<uint32_t> bits;
    while (x.size() < 4099) {  // not a multiple of 8: the tail too
        const uint32_t u = bits(rng);
        float f;
        std::memcpy(&f, &u, 4);
        x.push_back(f);
    }
    std::vector<uint16_t> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = k::f32_to_fp16(x[i]);
    for (k::Isa isa : {k::Isa::scalar, k::Isa::avx2, k::Isa::avx512}) {
        if (!k::set_isa(isa)) continue;
        std::vector<uint16_t> got(x.size(), 0xAAAA);
        k::f32_to_fp16_row(x.data(), got.data(), int64_t(x.size()));
        for (size_t i = 0; i < x.size(); ++i)
            ASSERT_EQ(got[i], want[i]) << k::isa_name(isa) << " element " << i << " = " << x[i];
    }
}

}  // namespace
