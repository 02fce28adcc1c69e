#include "kernels/fp_convert.hpp"
#include "kernels/kernels.hpp"

namespace moe::kernels {

float fp16_to_f32(uint16_t h) { return detail::half_to_f32(h); }
uint16_t f32_to_fp16(float f) { return detail::f32_to_half(f); }
float bf16_to_f32(uint16_t h) { return detail::bf16_to_f32_inline(h); }
uint16_t f32_to_bf16(float f) { return detail::f32_to_bf16_inline(f); }

}  // namespace moe::kernels
