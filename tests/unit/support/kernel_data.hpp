// Random weight rows and activations for kernel tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/ggml_types.hpp"
#include "kernels/kernels.hpp"

namespace moe::test {

// The weight types the engine computes with.
const std::vector<GgmlType> &compute_weight_types();

// A parameter of the kernel tests: a weight type and a row length.
struct KernelCase {
    GgmlType type;
    int64_t n;
};
// For every compute weight type in order, one case per row length that
// `lengths(block_elems)` gives for the type's block size.
std::vector<KernelCase> kernel_cases(const std::function<std::vector<int64_t>(int64_t block_elems)> &lengths);
// "<type>_<n>", the test name suffix.
std::string kernel_case_name(const ::testing::TestParamInfo<KernelCase> &info);

// A row of n elements of `type` with random quants and finite scale fields,
// including edge cases (zero, subnormal, negative, large fp16 scales).
std::vector<uint8_t> random_row(GgmlType type, int64_t n, std::mt19937 &rng);
// `rows` such rows, one after another (a weight matrix with row stride row_bytes(type, n)).
std::vector<uint8_t> random_rows(GgmlType type, int64_t n, int64_t rows, std::mt19937 &rng);
// A quantised row with every quant byte 0xFF (each quant at its largest
// stored value; MXFP4 0x77, its largest value 12, the largest once the
// kernels lift the values to unsigned) and finite scale fields (fp16 0.01,
// MXFP4 exponent 2^0).
std::vector<uint8_t> largest_quants_row(GgmlType type, int64_t n);
// n floats, normally distributed with standard deviation `scale`, with some
// exact zeros and a few outliers.
std::vector<float> random_floats(int64_t n, std::mt19937 &rng, float scale = 1.0f);

// Restores the ISA in force when it was made (tests switch ISAs with set_isa).
class IsaGuard {
public:
    IsaGuard() : saved_(kernels::active_isa()) {}
    ~IsaGuard() { kernels::set_isa(saved_); }
    IsaGuard(const IsaGuard &) = delete;
    IsaGuard &operator=(const IsaGuard &) = delete;

private:
    kernels::Isa saved_;
};

// The ISAs this CPU can run, scalar first.
std::vector<kernels::Isa> supported_isas();

}  // namespace moe::test
