// Scalar reference dot products: integer sums per block, float terms per
// block (dot_terms.hpp), canonical lane order (blocks.hpp).
#include <algorithm>
#include <cmath>

#include "kernels/blocks.hpp"
#include "kernels/dot_terms.hpp"
#include "kernels/kernels_internal.hpp"
#include "kernels/mxfp4.hpp"

namespace moe::kernels::detail {
namespace {

inline int32_t dot32(const int8_t *a, const int8_t *b) {
    int32_t s = 0;
    for (int j = 0; j < 32; ++j) s += a[j] * b[j];
    return s;
}

// Legacy weights (Q4_0 / Q5_0 / Q8_0, and MXFP4 with its own scale) against Q8_0 activations.
template <void (*Ints)(const uint8_t *, int8_t *), size_t kBytes, float (*Scale)(const uint8_t *) = fp16_scale>
float dot_legacy_q8_0(int64_t n, const void *w_row, const void *act) {
    const uint8_t *w = static_cast<const uint8_t *>(w_row);
    const uint8_t *a = static_cast<const uint8_t *>(act);
    BlockLanes acc;
    for (int64_t b = 0; b < n / 32; ++b, w += kBytes, a += q8_0::bytes) {
        int8_t v[32];
        Ints(w, v);
        const int32_t sumi = dot32(v, reinterpret_cast<const int8_t *>(a + q8_0::qs));
        acc.add(b, term_d(sumi, Scale(w), load_half(a + q8_0::d)));
    }
    return acc.total();
}

// Q4_1 / Q5_1 against Q8_1 (d at offset 0, m at offset 2 in both layouts).
template <void (*Ints)(const uint8_t *, int8_t *), size_t kBytes>
float dot_legacy_q8_1(int64_t n, const void *w_row, const void *act) {
    const uint8_t *w = static_cast<const uint8_t *>(w_row);
    const uint8_t *a = static_cast<const uint8_t *>(act);
    BlockLanes acc;
    for (int64_t b = 0; b < n / 32; ++b, w += kBytes, a += q8_1::bytes) {
        int8_t v[32];
        Ints(w, v);
        const int32_t sumi = dot32(v, reinterpret_cast<const int8_t *>(a + q8_1::qs));
        acc.add(b, term_dm(sumi, load_half(w + q4_1::d), load_half(a + q8_1::d), load_half(w + q4_1::m),
                           load_half(a + q8_1::s)));
    }
    return acc.total();
}

// Rows of K-quant super-blocks against Q8_K: Term gives a block's float term
// from its weight block w and activation block a.
template <size_t kBytes, float (*Term)(const uint8_t *w, const uint8_t *a)>
float dot_k(int64_t n, const void *w_row, const void *act) {
    const uint8_t *w = static_cast<const uint8_t *>(w_row);
    const uint8_t *a = static_cast<const uint8_t *>(act);
    BlockLanes acc;
    for (int64_t b = 0; b < n / 256; ++b, w += kBytes, a += q8_k::bytes) acc.add(b, Term(w, a));
    return acc.total();
}

inline const int8_t *act_quants(const uint8_t *a) { return reinterpret_cast<const int8_t *>(a + q8_k::qs); }
// sum_g S_g * <q_g, qa_g> over the 16 groups of 16 (Q6_K, Q3_K, Q2_K).
template <typename Scale, typename Quant>
int32_t group_sums16(const Scale *sc, const Quant *v, const uint8_t *a) {
    const int8_t *qa = act_quants(a);
    int32_t sumi = 0;
    for (int g = 0; g < 16; ++g) {
        int32_t dot = 0;
        for (int l = 0; l < 16; ++l) dot += v[16 * g + l] * qa[16 * g + l];
        sumi += sc[g] * dot;
    }
    return sumi;
}

// Q4_K / Q5_K: sumi = sum_s sc_s * <q_s, qa_s>, summ = sum_s m_s * (bsum_2s + bsum_2s+1).
template <bool kFive>
float term_q45_k(const uint8_t *w, const uint8_t *a) {
    uint8_t v[256];
    if constexpr (kFive) q5_k_ints(w, v); else q4_k_ints(w, v);
    const int8_t *qa = act_quants(a);
    int32_t sumi = 0, summ = 0;
    for (int s = 0; s < 8; ++s) {
        int sc, m;
        k_scale_min(w + q4_k::scales, s, sc, m);
        int32_t dot = 0;
        for (int l = 0; l < 32; ++l) dot += v[32 * s + l] * qa[32 * s + l];
        sumi += sc * dot;
        summ += m * (load_i16(a + q8_k::bsums + 4 * s) + load_i16(a + q8_k::bsums + 4 * s + 2));
    }
    return term_k_min(sumi, summ, load_half(w + q4_k::d), load_half(w + q4_k::dmin), load_f32(a + q8_k::d));
}

// Q6_K: sumi = sum_g sc_g * <q_g, qa_g> over the 16 groups (sc int8).
float term_q6_k(const uint8_t *w, const uint8_t *a) {
    int8_t v[256];
    q6_k_ints(w, v);
    const int32_t sumi = group_sums16(reinterpret_cast<const int8_t *>(w + q6_k::scales), v, a);
    return term_k(sumi, load_half(w + q6_k::d), load_f32(a + q8_k::d));
}

// Q2_K: sumi = sum_g sc_g * <q_g, qa_g>, summ = sum_g m_g * bsum_g over the
// 16 groups (sc, m the low and high nibble of scale byte g).
float term_q2_k(const uint8_t *w, const uint8_t *a) {
    uint8_t v[256];
    int sc[16], m[16];
    q2_k_ints(w, v);
    q2_k_scales_mins(w, sc, m);
    int32_t summ = 0;
    for (int g = 0; g < 16; ++g) summ += m[g] * load_i16(a + q8_k::bsums + 2 * g);
    return term_k_min(group_sums16(sc, v, a), summ, load_half(w + q2_k::d), load_half(w + q2_k::dmin),
                      load_f32(a + q8_k::d));
}

// Q3_K: sumi = sum_g S_g * <q_g, qa_g>, q in -4..3, S in -32..31.
float term_q3_k(const uint8_t *w, const uint8_t *a) {
    int8_t v[256];
    int s[16];
    q3_k_ints(w, v);
    q3_k_scales(w, s);
    return term_k(group_sums16(s, v, a), load_half(w + q3_k::d), load_f32(a + q8_k::d));
}

// IQ4_XS: sumi = sum_s S_s * <level_s, qa_s> over the 32-element sub-blocks.
float term_iq4_xs(const uint8_t *w, const uint8_t *a) {
    int8_t v[256];
    iq4_xs_ints(w, v);
    int32_t sumi = 0;
    for (int ib = 0; ib < 8; ++ib) sumi += iq4_xs_scale(w, ib) * dot32(v + 32 * ib, act_quants(a) + 32 * ib);
    return term_k(sumi, load_half(w + iq4_xs::d), load_f32(a + q8_k::d));
}

// Float rows: lane i % 32 += w_i * a_i (fused).
template <typename Load>
float dot_float(int64_t n, const uint8_t *w, const uint8_t *a, size_t elem_bytes, Load load) {
    FmaLanes acc;
    for (int64_t i = 0; i < n; ++i)
        acc.lane[i & 31] = std::fma(load(w + i * elem_bytes), load(a + i * elem_bytes), acc.lane[i & 31]);
    return acc.total();
}

float dot_f32(int64_t n, const void *w, const void *a) {
    return dot_float(n, static_cast<const uint8_t *>(w), static_cast<const uint8_t *>(a), 4, load_f32);
}
float dot_f16(int64_t n, const void *w, const void *a) {
    return dot_float(n, static_cast<const uint8_t *>(w), static_cast<const uint8_t *>(a), 2, load_half);
}
float dot_bf16(int64_t n, const void *w, const void *a) {
    return dot_float(n, static_cast<const uint8_t *>(w), static_cast<const uint8_t *>(a), 2,
                     [](const uint8_t *p) { return bf16_to_f32_inline(load_u16(p)); });
}

}  // namespace

float dot_exact(GgmlType weight, int64_t n, const void *w_row, const float *act) {
    const TypeTraits &tr = type_traits(weight);
    const uint8_t *w = static_cast<const uint8_t *>(w_row);
    FmaLanes acc;
    float buf[256];
    for (int64_t i = 0; i < n; i += 256) {
        const int64_t count = std::min<int64_t>(256, n - i);
        dequantize_scalar(weight, w + static_cast<size_t>(i / tr.block_elems) * tr.block_bytes, buf, count);
        for (int64_t j = 0; j < count; ++j) acc.lane[j & 31] = std::fma(buf[j], act[i + j], acc.lane[j & 31]);
    }
    return acc.total();
}

void fill_scalar_kernels(KernelTable &t) {
    auto set = [&](GgmlType type, DotFn fn) { t.type[static_cast<uint32_t>(type)].dot = fn; };
    set(GgmlType::F32, dot_f32);
    set(GgmlType::F16, dot_f16);
    set(GgmlType::BF16, dot_bf16);
    set(GgmlType::Q4_0, dot_legacy_q8_0<q4_0_ints, q4_0::bytes>);
    set(GgmlType::Q5_0, dot_legacy_q8_0<q5_0_ints, q5_0::bytes>);
    set(GgmlType::Q8_0, dot_legacy_q8_0<q8_0_ints, q8_0::bytes>);
    set(GgmlType::MXFP4, dot_legacy_q8_0<mxfp4_ints, mxfp4::bytes, mxfp4_scale>);
    set(GgmlType::Q4_1, dot_legacy_q8_1<q4_1_ints, q4_1::bytes>);
    set(GgmlType::Q5_1, dot_legacy_q8_1<q5_1_ints, q5_1::bytes>);
    set(GgmlType::Q4_K, dot_k<q4_k::bytes, term_q45_k<false>>);
    set(GgmlType::Q5_K, dot_k<q5_k::bytes, term_q45_k<true>>);
    set(GgmlType::Q6_K, dot_k<q6_k::bytes, term_q6_k>);
    set(GgmlType::Q2_K, dot_k<q2_k::bytes, term_q2_k>);
    set(GgmlType::Q3_K, dot_k<q3_k::bytes, term_q3_k>);
    set(GgmlType::IQ4_NL, dot_legacy_q8_0<iq4_nl_ints, iq4_nl::bytes>);
    set(GgmlType::IQ4_XS, dot_k<iq4_xs::bytes, term_iq4_xs>);
}

}  // namespace moe::kernels::detail
