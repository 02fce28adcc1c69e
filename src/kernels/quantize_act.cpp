// Activation conversion: the scalar definitions, and dispatch to the SIMD
// versions (quantize_act_avx2.cpp), which produce the same bytes.
#include <cmath>

#include "common/error.hpp"
#include "kernels/blocks.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/kernels.hpp"

namespace moe::kernels {
namespace {

using namespace detail;

inline int round_half_even(float v) { return static_cast<int>(std::nearbyint(v)); }

// Shared by Q8_0 and Q8_1: d = amax/127 (stored as fp16), q = round_even(x * 127/amax).
// Returns the f32 d and the sum of the quantised values.
float quantize_block_q8(const float *x, int8_t *q, int &sum) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    sum = 0;
    for (int j = 0; j < 32; ++j) {
        q[j] = static_cast<int8_t>(round_half_even(x[j] * id));
        sum += q[j];
    }
    return d;
}

void quantize_q8_0(const float *x, uint8_t *dst, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b, x += 32, dst += q8_0::bytes) {
        int sum;
        const float d = quantize_block_q8(x, reinterpret_cast<int8_t *>(dst + q8_0::qs), sum);
        const uint16_t dh = f32_to_half(d);
        std::memcpy(dst + q8_0::d, &dh, 2);
    }
}

void quantize_q8_1(const float *x, uint8_t *dst, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b, x += 32, dst += q8_1::bytes) {
        int sum;
        const float d = quantize_block_q8(x, reinterpret_cast<int8_t *>(dst + q8_1::qs), sum);
        const uint16_t dh = f32_to_half(d);
        const uint16_t sh = f32_to_half(d * static_cast<float>(sum));
        std::memcpy(dst + q8_1::d, &dh, 2);
        std::memcpy(dst + q8_1::s, &sh, 2);
    }
}

// Q8_K: the element of largest magnitude (first on ties) maps to -127;
// d = 1/iscale is stored as f32 and may be negative.
void quantize_q8_k(const float *x, uint8_t *dst, int64_t n) {
    for (int64_t b = 0; b < n / 256; ++b, x += 256, dst += q8_k::bytes) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 256; ++j) {
            const float ax = std::fabs(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        int8_t *q = reinterpret_cast<int8_t *>(dst + q8_k::qs);
        int16_t bsums[16] = {};
        float d = 0.0f;
        if (amax == 0.0f) {
            std::memset(q, 0, 256);
        } else {
            const float iscale = -127.0f / max;
            for (int j = 0; j < 256; ++j) {
                const int v = round_half_even(iscale * x[j]);
                q[j] = static_cast<int8_t>(v < 127 ? v : 127);
                bsums[j / 16] = static_cast<int16_t>(bsums[j / 16] + q[j]);
            }
            d = 1.0f / iscale;
        }
        std::memcpy(dst + q8_k::d, &d, 4);
        std::memcpy(dst + q8_k::bsums, bsums, sizeof bsums);
    }
}

// n halves written as bytes (an activation row need not be 2-byte aligned).
void to_f16(const float *x, uint8_t *dst, int64_t n) {
    if (const QuantizeFn simd = kernel_table(active_isa()).act.f16) return simd(x, dst, n);
    for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_half(x[i]);
        std::memcpy(dst + 2 * i, &h, 2);
    }
}

}  // namespace

void f32_to_fp16_row(const float *x, uint16_t *out, int64_t n) { to_f16(x, reinterpret_cast<uint8_t *>(out), n); }

GgmlType act_type(GgmlType weight, bool exact) {
    if (exact) return GgmlType::F32;
    switch (weight) {
    case GgmlType::F32: return GgmlType::F32;
    case GgmlType::F16: return GgmlType::F16;
    case GgmlType::BF16: return GgmlType::BF16;
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0:
    case GgmlType::IQ4_NL:
    case GgmlType::MXFP4: return GgmlType::Q8_0;
    case GgmlType::Q4_1:
    case GgmlType::Q5_1: return GgmlType::Q8_1;
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::IQ4_XS: return GgmlType::Q8_K;
    default: break;
    }
    const TypeTraits &tr = type_traits(weight);
    fail(Status::unsupported, "no compute kernels for weight type %s (id %u)", tr.name ? tr.name : "unknown",
         static_cast<unsigned>(weight));
}

size_t act_row_bytes(GgmlType weight, int64_t n, bool exact) {
    return static_cast<size_t>(row_bytes(act_type(weight, exact), static_cast<uint64_t>(n)));
}

void quantize_act(GgmlType weight, const float *x, void *dst, int64_t n, bool exact) {
    const GgmlType at = act_type(weight, exact);
    const uint32_t be = type_traits(at).block_elems;
    if (n < 0 || n % be != 0 || n % type_traits(weight).block_elems != 0)
        fail(Status::invalid_argument, "quantize_act: %lld elements is not a multiple of the %s block size",
             static_cast<long long>(n), type_traits(weight).name);
    uint8_t *out = static_cast<uint8_t *>(dst);
    const detail::ActKernels &simd = detail::kernel_table(active_isa()).act;
    switch (at) {
    case GgmlType::F32: std::memcpy(dst, x, static_cast<size_t>(n) * 4); return;
    case GgmlType::F16: return to_f16(x, out, n);
    case GgmlType::BF16:
        for (int64_t i = 0; i < n; ++i) {
            const uint16_t h = f32_to_bf16_inline(x[i]);
            std::memcpy(out + 2 * i, &h, 2);
        }
        return;
    case GgmlType::Q8_0: (simd.q8_0 ? simd.q8_0 : quantize_q8_0)(x, out, n); return;
    case GgmlType::Q8_1: (simd.q8_1 ? simd.q8_1 : quantize_q8_1)(x, out, n); return;
    case GgmlType::Q8_K: (simd.q8_k ? simd.q8_k : quantize_q8_k)(x, out, n); return;
    default: break;
    }
    fail(Status::internal, "quantize_act: unexpected activation type %u", static_cast<unsigned>(at));
}

}  // namespace moe::kernels
