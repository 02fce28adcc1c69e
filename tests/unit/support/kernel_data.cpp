#include "support/kernel_data.hpp"

#include <cstring>

#include "kernels/kernels.hpp"

namespace moe::test {
namespace {

uint16_t random_scale(std::mt19937 &rng) {
    std::uniform_int_distribution<int> pick(0, 19);
    switch (pick(rng)) {
    case 0: return 0;                                                          // zero
    case 1: return static_cast<uint16_t>(std::uniform_int_distribution<int>(1, 0x3ff)(rng));  // subnormal
    case 2: return 0x7bff;                                                     // largest finite
    default: {
        std::uniform_real_distribution<float> mag(-0.02f, 0.02f);
        return kernels::f32_to_fp16(mag(rng));
    }
    }
}

// An MXFP4 exponent byte: the f32 subnormal scales (0, 1), the smallest
// normal one (2), and otherwise scales from 2^-20 to 2^3 (larger ones
// overflow the dot products to infinity, which compares as unequal NaN).
uint8_t random_exponent(std::mt19937 &rng) {
    const int pick = std::uniform_int_distribution<int>(0, 19)(rng);
    if (pick < 3) return static_cast<uint8_t>(pick);
    return static_cast<uint8_t>(std::uniform_int_distribution<int>(108, 131)(rng));
}

void put16(uint8_t *p, uint16_t v) { std::memcpy(p, &v, 2); }

// Overwrites the fp16 scale fields of every block of a quantised row with
// scale() (and MXFP4's exponent bytes with exponent()), in block order.
void set_scale_fields(GgmlType type, std::vector<uint8_t> &row, const std::function<uint16_t()> &scale,
                      const std::function<uint8_t()> &exponent) {
    const size_t block_bytes = type_traits(type).block_bytes;
    for (size_t off = 0; off < row.size(); off += block_bytes) {
        uint8_t *b = row.data() + off;
        switch (type) {
        case GgmlType::Q4_0:
        case GgmlType::Q5_0:
        case GgmlType::Q8_0:
        case GgmlType::IQ4_NL:
        case GgmlType::IQ4_XS: put16(b, scale()); break;
        case GgmlType::Q2_K:
            put16(b + 80, scale());
            put16(b + 82, scale());
            break;
        case GgmlType::Q3_K: put16(b + 108, scale()); break;
        case GgmlType::Q4_1:
        case GgmlType::Q5_1:
        case GgmlType::Q4_K:
        case GgmlType::Q5_K:
            put16(b, scale());
            put16(b + 2, scale());
            break;
        case GgmlType::Q6_K: put16(b + 208, scale()); break;
        case GgmlType::MXFP4: b[0] = exponent(); break;
        default: break;
        }
    }
}

}  // namespace

const std::vector<GgmlType> &compute_weight_types() {
    static const std::vector<GgmlType> types = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,
                                                GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                                                GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q2_K,
                                                GgmlType::Q3_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4};
    return types;
}

std::vector<KernelCase> kernel_cases(const std::function<std::vector<int64_t>(int64_t block_elems)> &lengths) {
    std::vector<KernelCase> out;
    for (GgmlType t : compute_weight_types())
        for (int64_t n : lengths(type_traits(t).block_elems)) out.push_back({t, n});
    return out;
}

std::string kernel_case_name(const ::testing::TestParamInfo<KernelCase> &info) {
    return std::string(type_traits(info.param.type).name) + "_" + std::to_string(info.param.n);
}

std::vector<float> random_floats(int64_t n, std::mt19937 &rng, float scale) {
    std::normal_distribution<float> normal(0.0f, scale);
    std::uniform_int_distribution<int> pick(0, 99);
    std::vector<float> x(static_cast<size_t>(n));
    for (auto &v : x) {
        const int p = pick(rng);
        v = p == 0 ? 0.0f : p == 1 ? normal(rng) * 30.0f : normal(rng);
    }
    return x;
}

std::vector<uint8_t> random_row(GgmlType type, int64_t n, std::mt19937 &rng) {
    std::vector<uint8_t> row(row_bytes(type, static_cast<uint64_t>(n)));
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto &b : row) b = static_cast<uint8_t>(byte(rng));
    if (type == GgmlType::F32) {
        const auto v = random_floats(n, rng);
        std::memcpy(row.data(), v.data(), row.size());
        return row;
    }
    if (type == GgmlType::F16 || type == GgmlType::BF16) {
        const auto v = random_floats(n, rng);
        for (int64_t i = 0; i < n; ++i)
            put16(row.data() + 2 * i, type == GgmlType::F16 ? kernels::f32_to_fp16(v[i]) : kernels::f32_to_bf16(v[i]));
        return row;
    }
    set_scale_fields(type, row, [&] { return random_scale(rng); }, [&] { return random_exponent(rng); });
    return row;
}

std::vector<uint8_t> largest_quants_row(GgmlType type, int64_t n) {
    std::vector<uint8_t> row(row_bytes(type, static_cast<uint64_t>(n)), type == GgmlType::MXFP4 ? 0x77 : 0xFF);
    set_scale_fields(type, row, [] { return kernels::f32_to_fp16(0.01f); }, [] { return uint8_t{127}; });
    return row;
}

std::vector<uint8_t> random_rows(GgmlType type, int64_t n, int64_t rows, std::mt19937 &rng) {
    std::vector<uint8_t> w;
    for (int64_t r = 0; r < rows; ++r) {
        const auto row = random_row(type, n, rng);
        w.insert(w.end(), row.begin(), row.end());
    }
    return w;
}

std::vector<kernels::Isa> supported_isas() {
    IsaGuard guard;
    std::vector<kernels::Isa> out;
    for (kernels::Isa isa : {kernels::Isa::scalar, kernels::Isa::avx2, kernels::Isa::avx512})
        if (kernels::set_isa(isa)) out.push_back(isa);
    return out;
}

}  // namespace moe::test
