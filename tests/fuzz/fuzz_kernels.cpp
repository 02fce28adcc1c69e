// Fuzz target: the compute kernels on arbitrary weight bytes.
// Input: byte 0 picks the weight type (one of those the engine computes with)
// and exact mode, byte 1 the row length in blocks (1-16); the rest fills three
// weight rows (repeated when short; scale fields may be any bits: zero,
// subnormal, infinite, NaN) and two activation rows of finite values.
// Every ISA this CPU has must give the scalar result for dot, matvec_rows and
// matmat_rows: the same bits, or NaN where the scalar result is NaN. Buffers
// are exactly as large as the kernels may read, so the sanitizers report any
// read past a row.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/ggml_types.hpp"
#include "kernels/kernels.hpp"

namespace {

namespace k = moe::kernels;
using moe::GgmlType;

constexpr GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,
                               GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                               GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q2_K,
                               GgmlType::Q3_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4};
constexpr int64_t kRows = 3;
constexpr int32_t kTokens = 2;

bool same_result(float scalar, float other) {
    if (std::isnan(scalar)) return std::isnan(other);
    return std::memcmp(&scalar, &other, sizeof scalar) == 0;
}

// All results of one ISA, in a fixed order: dot per (token, row), then
// matvec_rows per token, then matmat_rows.
std::vector<float> compute(GgmlType t, int64_t n, const std::vector<uint8_t> &w, size_t rb,
                           const std::vector<uint8_t> &acts, size_t ab, bool exact) {
    std::vector<float> out;
    for (int32_t tk = 0; tk < kTokens; ++tk)
        for (int64_t r = 0; r < kRows; ++r)
            out.push_back(k::dot(t, n, w.data() + size_t(r) * rb, acts.data() + size_t(tk) * ab, exact));
    std::vector<float> y(size_t(kRows) * kTokens);
    for (int32_t tk = 0; tk < kTokens; ++tk)
        k::matvec_rows(t, n, w.data(), rb, acts.data() + size_t(tk) * ab, y.data() + size_t(tk) * kRows, 0, kRows,
                       exact);
    out.insert(out.end(), y.begin(), y.end());
    k::matmat_rows(t, n, w.data(), rb, acts.data(), ab, kTokens, y.data(), kRows, 0, kRows, exact);
    out.insert(out.end(), y.begin(), y.end());
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    const size_t n_types = sizeof kTypes / sizeof kTypes[0];
    const GgmlType t = kTypes[(data[0] >> 1) % n_types];
    const bool exact = data[0] & 1;
    const int64_t block = int64_t(moe::type_traits(t).block_elems);
    const int64_t n = block * (1 + data[1] % 16);
    const uint8_t *fill = data + 2;
    const size_t n_fill = size - 2;

    const size_t rb = moe::row_bytes(t, uint64_t(n));
    std::vector<uint8_t> w(rb * size_t(kRows));
    for (size_t i = 0; i < w.size(); ++i) w[i] = fill[i % n_fill];
    // Finite activations in [-8, 8): the fuzzed part is the weight encoding.
    std::vector<float> x(size_t(n) * kTokens);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int8_t(fill[(i * 7 + 3) % n_fill])) / 16.0f;
    const size_t ab = k::act_row_bytes(t, n, exact);
    std::vector<uint8_t> acts(ab * kTokens);
    for (int32_t tk = 0; tk < kTokens; ++tk)
        k::quantize_act(t, x.data() + size_t(tk) * size_t(n), acts.data() + size_t(tk) * ab, n, exact);

    const k::Isa saved = k::active_isa();
    std::vector<float> reference;
    for (k::Isa isa : {k::Isa::scalar, k::Isa::avx2, k::Isa::avx512}) {
        if (!k::set_isa(isa)) continue;
        const std::vector<float> got = compute(t, n, w, rb, acts, ab, exact);
        if (reference.empty()) {
            reference = got;
            // matvec and matmat are the per-row dot, exactly.
            for (size_t i = 0; i < size_t(kRows) * kTokens; ++i)
                if (!same_result(got[i], got[i + size_t(kRows) * kTokens]) ||
                    !same_result(got[i], got[i + 2 * size_t(kRows) * kTokens]))
                    std::abort();
            continue;
        }
        for (size_t i = 0; i < got.size(); ++i)
            if (!same_result(reference[i], got[i])) std::abort();
    }
    k::set_isa(saved);
    return 0;
}
