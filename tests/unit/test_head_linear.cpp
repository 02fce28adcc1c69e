// multiply_heads (every head's slice of a per-head matrix in one pass) against
// one Linear::run per head, the form latent attention used before: bit for bit
// for every weight type, one and several tokens, one and three threads, with
// padded input and output strides.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "runtime/head_linear.hpp"
#include "runtime/linear.hpp"
#include "support/kernel_data.hpp"

using moe::test::KernelCase;

namespace {

std::vector<KernelCase> cases() {
    return moe::test::kernel_cases([](int64_t block_elems) -> std::vector<int64_t> {
        return {block_elems == 1 ? 48 : block_elems * 2};
    });
}

class HeadLinear : public ::testing::TestWithParam<KernelCase> {};

TEST_P(HeadLinear, EqualsOneRunPerHead) {
    const auto [type, n] = GetParam();
    const int32_t n_head = 5;
    const int64_t rows = 37;
    std::mt19937 rng(7 + static_cast<int>(type));
    const std::vector<uint8_t> data = moe::test::random_rows(type, n, rows * n_head, rng);
    moe::MatrixView w;
    w.data = data.data();
    w.type = type;
    w.cols = n;
    w.rows = rows * n_head;
    w.row_bytes = moe::row_bytes(type, n);
    // Padding between heads and tokens, as q_full_ keeps each head's rotary part after its input.
    const size_t x_head = size_t(n) + 3, x_token = x_head * n_head + 5;
    const size_t y_head = size_t(rows) + 2, y_token = y_head * n_head + 1;
    for (const bool exact : {false, true}) {
        for (const int32_t n_tokens : {1, 4}) {
            const std::vector<float> x = moe::test::random_floats(int64_t(x_token) * n_tokens, rng);
            for (const int32_t threads : {1, 3}) {
                moe::ThreadPool pool(threads);
                std::vector<uint8_t> act(moe::kernels::act_row_bytes(type, n, exact) * size_t(n_tokens));
                moe::Linear linear(pool, exact, act.data(), act.size());
                std::vector<float> want(y_token * n_tokens, -1.0f), got(want);
                for (int32_t h = 0; h < n_head; ++h)
                    linear.run(w.rows_from(int64_t(h) * rows, rows), &x[size_t(h) * x_head], x_token, n_tokens,
                               &want[size_t(h) * y_head], y_token);
                std::vector<uint8_t> head_act(moe::head_act_bytes(w, n_head, n_tokens, exact));
                const moe::HeadSlices s{.w = &w, .n_head = n_head, .rows = rows, .x = x.data(), .x_head = x_head,
                                        .x_token = x_token, .y = got.data(), .y_head = y_head, .y_token = y_token};
                moe::multiply_heads(pool, exact, s, n_tokens, head_act.data(), head_act.size());
                ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
                    << "exact " << exact << ", " << n_tokens << " tokens, " << threads << " threads";
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, HeadLinear, ::testing::ValuesIn(cases()), moe::test::kernel_case_name);

}  // namespace
