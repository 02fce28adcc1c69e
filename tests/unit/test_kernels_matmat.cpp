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
// one group (taken eight rows at a time: row by row for one token, block by
// block for several), from one super-block to seven.
std::vector<KernelCase> cases() {
    return moe::test::kernel_cases([](int64_t block_elems) -> std::vector<int64_t> {
        if (block_elems == 1) return {1000};
        if (block_elems == 32) return {32 * 19, 32 * 5};
        return {256 * 11, 256 * 7, 256 * 3, 256};
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

// Every quant at its largest against activations of the largest magnitude,
// all -127 (even tokens) or +127 after a first -127 (odd tokens): the SIMD
// kernels add products in int16 (vpmaddubsw pairs, and several of those
// before one vpmaddwd) and must stay exact at these extremes, which random
// quants almost never reach. Full groups with a tail, rows shorter than one
// group, and one to five tokens (tiles of four and one).
TEST(MatmatLimits, LargestQuantsAndActivationsEqualScalar) {
    for (GgmlType t : moe::test::compute_weight_types()) {
        const int64_t block = moe::type_traits(t).block_elems;
        if (block == 1) continue;
        for (const int64_t n : {block * 11, block * 3, block}) {
            const int64_t rows = 9;
            const size_t rb = moe::row_bytes(t, n);
            std::vector<uint8_t> w;
            for (int64_t r = 0; r < rows; ++r) {
                const auto row = moe::test::largest_quants_row(t, n);
                w.insert(w.end(), row.begin(), row.end());
            }
            const int32_t tokens = 5;
            const size_t ab = k::act_row_bytes(t, n, false);
            std::vector<uint8_t> acts(ab * tokens);
            for (int32_t tk = 0; tk < tokens; ++tk) {
                std::vector<float> x(static_cast<size_t>(n), tk % 2 ? 1.0f : -1.0f);
                x[0] = -1.0f;
                k::quantize_act(t, x.data(), acts.data() + tk * ab, n, false);
            }
            IsaGuard guard;
            std::vector<float> reference;
            for (k::Isa isa : supported_isas()) {
                ASSERT_TRUE(k::set_isa(isa));
                std::vector<float> by_matvec(static_cast<size_t>(rows) * tokens), by_matmat(by_matvec.size());
                for (int32_t tk = 0; tk < tokens; ++tk)
                    k::matvec_rows(t, n, w.data(), rb, acts.data() + tk * ab, by_matvec.data() + tk * rows, 0, rows,
                                   false);
                k::matmat_rows(t, n, w.data(), rb, acts.data(), ab, tokens, by_matmat.data(), rows, 0, rows, false);
                if (reference.empty()) reference = by_matvec;
                for (size_t i = 0; i < reference.size(); ++i) {
                    ASSERT_TRUE(same_bits(by_matvec[i], reference[i]))
                        << moe::type_traits(t).name << " n=" << n << " " << k::isa_name(isa) << " matvec token "
                        << i / rows << " row " << i % rows << ": " << by_matvec[i] << " vs " << reference[i];
                    ASSERT_TRUE(same_bits(by_matmat[i], reference[i]))
                        << moe::type_traits(t).name << " n=" << n << " " << k::isa_name(isa) << " matmat token "
                        << i / rows << " row " << i % rows << ": " << by_matmat[i] << " vs " << reference[i];
                }
            }
        }
    }
}

}  // namespace
