// Scalar dequantisation. The float arithmetic is spelled out in kernels.hpp;
// it is the single definition of a weight's value used by exact mode, by
// get_rows-style lookups and by the tests.
#include <cmath>

#include "common/error.hpp"
#include "kernels/blocks.hpp"
#include "kernels/kernels_internal.hpp"
#include "kernels/mxfp4.hpp"

namespace moe::kernels::detail {
namespace {

// Legacy blocks: q * d, d the block's fp16 scale (MXFP4: its exponent's scale).
template <void (*Ints)(const uint8_t *, int8_t *), float (*Scale)(const uint8_t *) = fp16_scale>
void dq_legacy(const uint8_t *b, float *y) {
    int8_t v[32];
    Ints(b, v);
    const float d = Scale(b);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(v[j]) * d;
}
// Q4_1 / Q5_1: q * d + m (d at offset 0, m at offset 2 in both layouts).
template <void (*Ints)(const uint8_t *, int8_t *)>
void dq_legacy_min(const uint8_t *b, float *y) {
    int8_t v[32];
    Ints(b, v);
    const float d = load_half(b + q4_1::d), m = load_half(b + q4_1::m);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(v[j]) * d + m;
}

template <bool kFive>
void dq_q45_k(const uint8_t *b, float *y) {
    uint8_t v[256];
    if constexpr (kFive) q5_k_ints(b, v); else q4_k_ints(b, v);
    const float d = load_half(b + q4_k::d), dmin = load_half(b + q4_k::dmin);
    const uint8_t *scales = b + q4_k::scales;
    for (int s = 0; s < 8; ++s) {
        int sc, m;
        k_scale_min(scales, s, sc, m);
        const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
        for (int l = 0; l < 32; ++l) y[32 * s + l] = d1 * static_cast<float>(v[32 * s + l]) - m1;
    }
}
// (d*S_g)*q per 16-element group g (Q6_K, Q3_K).
template <typename Scale>
void dq_groups16(float d, const Scale *sc, const int8_t *v, float *y) {
    for (int g = 0; g < 16; ++g) {
        const float dg = d * static_cast<float>(sc[g]);
        for (int l = 0; l < 16; ++l) y[16 * g + l] = dg * static_cast<float>(v[16 * g + l]);
    }
}
void dq_q6_k(const uint8_t *b, float *y) {
    int8_t v[256];
    q6_k_ints(b, v);
    dq_groups16(load_half(b + q6_k::d), reinterpret_cast<const int8_t *>(b + q6_k::scales), v, y);
}

// Q2_K: (d*sc)*q - (dmin*m) per 16-element group (sc, m the 4-bit halves of its scale byte).
void dq_q2_k(const uint8_t *b, float *y) {
    uint8_t v[256];
    int sc[16], m[16];
    q2_k_ints(b, v);
    q2_k_scales_mins(b, sc, m);
    const float d = load_half(b + q2_k::d), dmin = load_half(b + q2_k::dmin);
    for (int g = 0; g < 16; ++g) {
        const float dg = d * static_cast<float>(sc[g]), mg = dmin * static_cast<float>(m[g]);
        for (int l = 0; l < 16; ++l) y[16 * g + l] = dg * static_cast<float>(v[16 * g + l]) - mg;
    }
}
// Q3_K: (d*S)*q per 16-element group, S and q signed.
void dq_q3_k(const uint8_t *b, float *y) {
    int8_t v[256];
    int s[16];
    q3_k_ints(b, v);
    q3_k_scales(b, s);
    dq_groups16(load_half(b + q3_k::d), s, v, y);
}
// IQ4_XS: (d*S)*level per 32-element sub-block.
void dq_iq4_xs(const uint8_t *b, float *y) {
    int8_t v[256];
    iq4_xs_ints(b, v);
    const float d = load_half(b + iq4_xs::d);
    for (int ib = 0; ib < 8; ++ib) {
        const float dl = d * static_cast<float>(iq4_xs_scale(b, ib));
        for (int j = 0; j < 32; ++j) y[32 * ib + j] = dl * static_cast<float>(v[32 * ib + j]);
    }
}

template <void (*Block)(const uint8_t *, float *), int kElems, size_t kBytes>
void dq_blocks(const void *src, float *dst, int64_t n) {
    const uint8_t *p = static_cast<const uint8_t *>(src);
    for (int64_t i = 0; i < n / kElems; ++i) Block(p + i * kBytes, dst + i * kElems);
}

}  // namespace

void dequantize_scalar(GgmlType type, const void *src, float *dst, int64_t n) {
    const TypeTraits &tr = type_traits(type);
    if (!tr.weight_supported)
        fail(Status::unsupported, "dequantize: tensor type %s (id %u) is not supported",
             tr.name ? tr.name : "unknown", static_cast<unsigned>(type));
    if (n < 0 || n % tr.block_elems != 0)
        fail(Status::invalid_argument, "dequantize: %lld elements is not a multiple of the %s block size %u",
             static_cast<long long>(n), tr.name, tr.block_elems);
    const uint8_t *p = static_cast<const uint8_t *>(src);
    switch (type) {
    case GgmlType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case GgmlType::F16:
        for (int64_t i = 0; i < n; ++i) dst[i] = load_half(p + 2 * i);
        return;
    case GgmlType::BF16:
        for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32_inline(load_u16(p + 2 * i));
        return;
    case GgmlType::Q4_0: dq_blocks<dq_legacy<q4_0_ints>, 32, q4_0::bytes>(src, dst, n); return;
    case GgmlType::Q4_1: dq_blocks<dq_legacy_min<q4_1_ints>, 32, q4_1::bytes>(src, dst, n); return;
    case GgmlType::Q5_0: dq_blocks<dq_legacy<q5_0_ints>, 32, q5_0::bytes>(src, dst, n); return;
    case GgmlType::Q5_1: dq_blocks<dq_legacy_min<q5_1_ints>, 32, q5_1::bytes>(src, dst, n); return;
    case GgmlType::Q8_0: dq_blocks<dq_legacy<q8_0_ints>, 32, q8_0::bytes>(src, dst, n); return;
    case GgmlType::Q4_K: dq_blocks<dq_q45_k<false>, 256, q4_k::bytes>(src, dst, n); return;
    case GgmlType::Q5_K: dq_blocks<dq_q45_k<true>, 256, q5_k::bytes>(src, dst, n); return;
    case GgmlType::Q6_K: dq_blocks<dq_q6_k, 256, q6_k::bytes>(src, dst, n); return;
    case GgmlType::Q2_K: dq_blocks<dq_q2_k, 256, q2_k::bytes>(src, dst, n); return;
    case GgmlType::Q3_K: dq_blocks<dq_q3_k, 256, q3_k::bytes>(src, dst, n); return;
    case GgmlType::IQ4_NL: dq_blocks<dq_legacy<iq4_nl_ints>, 32, iq4_nl::bytes>(src, dst, n); return;
    case GgmlType::IQ4_XS: dq_blocks<dq_iq4_xs, 256, iq4_xs::bytes>(src, dst, n); return;
    case GgmlType::MXFP4: dq_blocks<dq_legacy<mxfp4_ints, mxfp4_scale>, 32, mxfp4::bytes>(src, dst, n); return;
    default: break;
    }
    fail(Status::unsupported, "dequantize: no kernel for tensor type %s", tr.name);
}

}  // namespace moe::kernels::detail
