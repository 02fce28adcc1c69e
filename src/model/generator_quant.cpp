// Quant mixes of the generator: one type per tensor role, with
// llama-quantize's fallbacks for rows a K-quant block does not divide.
#include "common/error.hpp"
#include "model/generator_parts.hpp"

namespace moe::gen {

// K-quants need rows that are multiples of 256; like llama-quantize, fall back
// to a 32-block type otherwise (the low-bit types to IQ4_NL).
GgmlType fit(GgmlType want, int64_t row) {
    if (row % type_traits(want).block_elems == 0) return want;
    if (want == GgmlType::Q4_K) return GgmlType::Q5_0;
    if (want == GgmlType::Q2_K || want == GgmlType::Q3_K || want == GgmlType::IQ4_XS) return GgmlType::IQ4_NL;
    return GgmlType::Q8_0;
}

// The mixes follow llama-quantize's idea, simplified to one type per tensor
// role: the bulk (expert gate/up, attention) at the named type, the tensors
// most sensitive to error (attn_v, expert down, output) one or more steps up.
//   q4_k_m  Q4_K; attn_v, down, embd, output Q6_K
//   q3_k_m  Q3_K; attn_v, down Q4_K; output Q6_K
//   q2_k    Q2_K; attn_v, down Q3_K; output Q6_K
//   iq4_xs  IQ4_XS; output Q6_K
QuantMix quant_mix(const std::string &quant) {
    if (quant == "q4_k_m")
        return {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q6_K, GgmlType::Q6_K, 15};
    if (quant == "q3_k_m")
        return {GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q3_K, GgmlType::Q6_K, 12};
    if (quant == "q2_k")
        return {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q2_K, GgmlType::Q6_K, 10};
    if (quant == "iq4_xs")
        return {GgmlType::IQ4_XS, GgmlType::IQ4_XS, GgmlType::IQ4_XS, GgmlType::IQ4_XS, GgmlType::IQ4_XS,
                GgmlType::Q6_K, 30};
    if (quant == "q8_0")
        return {GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0, 7};
    if (quant == "f32")
        return {GgmlType::F32, GgmlType::F32, GgmlType::F32, GgmlType::F32, GgmlType::F32, GgmlType::F32, 0};
    fail(Status::invalid_argument, "unknown quant '%s' (q4_k_m, q3_k_m, q2_k, iq4_xs, q8_0, f32)", quant.c_str());
}

}  // namespace moe::gen
