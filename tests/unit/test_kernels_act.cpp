// Activation conversion gives the same bytes on every ISA this CPU has.
#include <gtest/gtest.h>

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

}  // namespace
