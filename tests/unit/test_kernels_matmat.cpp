// Multi-token matmat against per-token matvec and the scalar reference, bit
// for bit, for every weight type, token counts 1..9 and odd row ranges, on
// every ISA this CPU has.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/kernels.hpp"
#include "support/kernel_data.hpp"

using moe::GgmlType;
namespace k = moe::kernels;
using moe::test::IsaGuard;
using moe::test::KernelCase;
using moe::test::supported_isas;

namespace {

// Row lengths that exercise full groups of 8 blocks and a partial group,
// 32-element-block rows with no full group, and K-quant rows shorter than
// one group (taken eight rows at a time).
std::vector<KernelCase> cases() {
    return moe::test::kernel_cases([](int64_t block_elems) -> std::vector<int64_t> {
        if (block_elems == 1) return {1000};
        if (block_elems == 32) return {32 * 19, 32 * 5};
        return {256 * 11, 256 * 3, 256};
    });
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

class Matmat : public ::testing::TestWithParam<KernelCase> {};

TEST_P(Matmat, EqualsPerTokenMatvecAndScalarForAllTokenCounts) {
    const auto [t, n] = GetParam();
    std::mt19937 rng(31 + static_cast<int>(t));
    const int64_t rows = 19;
    const int32_t max_tokens = 9;
    const size_t rb = moe::row_bytes(t, n);
    const std::vector<uint8_t> w = moe::test::random_rows(t, n, rows, rng);
    const size_t ab = k::act_row_bytes(t, n, false) + 24;  // padded stride
    std::vector<uint8_t> acts(ab * max_tokens);
    for (int32_t tk = 0; tk < max_tokens; ++tk) {
        const auto x = moe::test::random_floats(n, rng, tk % 3 == 0 ? 1e-2f : 1.0f);
        k::quantize_act(t, x.data(), acts.data() + tk * ab, n, false);
    }
    IsaGuard guard;
    // Scalar per-token matvec over all rows: the reference, [token][row].
    ASSERT_TRUE(k::set_isa(k::Isa::scalar));
    std::vector<float> reference(static_cast<size_t>(rows) * max_tokens);
    for (int32_t tk = 0; tk < max_tokens; ++tk)
        k::matvec_rows(t, n, w.data(), rb, acts.data() + tk * ab, reference.data() + tk * rows, 0, rows, false);

    const std::pair<int64_t, int64_t> ranges[] = {{0, rows}, {3, 10}, {5, 6}, {7, 7}, {1, 18}, {2, 10}};
    for (k::Isa isa : supported_isas()) {
        ASSERT_TRUE(k::set_isa(isa));
        // Per-token matvec on this ISA equals the scalar reference.
        for (int32_t tk = 0; tk < max_tokens; ++tk) {
            std::vector<float> y(rows);
            k::matvec_rows(t, n, w.data(), rb, acts.data() + tk * ab, y.data(), 0, rows, false);
            for (int64_t r = 0; r < rows; ++r)
                ASSERT_TRUE(same_bits(y[r], reference[tk * rows + r]))
                    << k::isa_name(isa) << " matvec token " << tk << " row " << r << ": " << y[r] << " vs "
                    << reference[tk * rows + r];
        }
        for (int32_t tokens = 1; tokens <= max_tokens; ++tokens)
            for (const auto &[r0, r1] : ranges) {
                // y indexed by absolute row with a stride larger than rows; NaN marks untouched cells.
                const size_t y_stride = rows + 3;
                std::vector<float> y(y_stride * tokens, NAN);
                k::matmat_rows(t, n, w.data(), rb, acts.data(), ab, tokens, y.data(), y_stride, r0, r1, false);
                for (int32_t tk = 0; tk < tokens; ++tk)
                    for (int64_t r = 0; r < static_cast<int64_t>(y_stride); ++r) {
                        const float got = y[tk * y_stride + r];
                        if (r < r0 || r >= r1) {
                            ASSERT_TRUE(std::isnan(got)) << "matmat wrote outside its rows: row " << r;
                            continue;
                        }
                        ASSERT_TRUE(same_bits(got, reference[tk * rows + r]))
                            << k::isa_name(isa) << " matmat tokens=" << tokens << " rows [" << r0 << "," << r1
                            << ") token " << tk << " row " << r << ": " << got << " vs " << reference[tk * rows + r];
                    }
            }
    }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, Matmat, ::testing::ValuesIn(cases()), moe::test::kernel_case_name);

}  // namespace
