// Rotary position embedding, NORMAL (pairs 2i, 2i+1) and NEOX (pairs i,
// i + n_rot/2). Angles follow ggml: theta_i = p * theta_scale^i computed by
// repeated float multiplication, divided by an optional per-pair frequency
// factor, times freq_scale (or mixed with YaRN). Dimensions at or beyond
// n_rot pass unchanged.
#pragma once

#include <cstdint>

namespace moe {

// Which dimensions RoPE pairs (the architecture's trait, ArchTraits::rope_type).
enum class RopeType : int32_t { normal = 0, neox = 2 };

struct RopeParams {
    int32_t n_rot = 0;
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;
    const float *freq_factors = nullptr;  // n_rot/2 divisors, or null
    // YaRN (ext_factor 1, set by rope_enable_yarn): pair i's angle is
    // theta_interp (1 - mix_i) + theta_extrap mix_i, mix_i = ramp_i ext_factor
    // with ramp_i = 1 - clamp((i - low) / max(0.001, high - low), 0, 1). Off
    // (ext_factor 0) the angles are theta_interp.
    float ext_factor = 0.0f;
    float yarn_low = 0.0f, yarn_high = 0.0f;
    // cos/sin are multiplied by mscale: YaRN's magnitude times
    // rope.scaling.attn_factor (1 and 1 by default: unscaled, bit for bit).
    float mscale = 1.0f;
};

// Turns YaRN on as llama.cpp applies it for a rope.scaling.type of "yarn":
// correction dims low = max(0, floor(corr(32))), high = min(n_rot - 1,
// ceil(corr(1))) with corr(b) = n_rot ln(n_ctx_orig / (2 pi b)) / (2 ln
// freq_base), and mscale = 1 + 0.1 ln(1 / freq_scale) when 1 / freq_scale > 1,
// else 1 (llama.cpp's get_mscale: a factor below 1 does not shrink cos/sin).
// unit_magnitude keeps mscale 1: llama.cpp's attn_factor cancels that factor
// when a file gives rope.scaling.yarn_log_multiplier (deepseek2, whose mscale
// and mscale_all_dim are equal), the attention scale then carrying YaRN's mscale.
void rope_enable_yarn(RopeParams &p, int32_t n_ctx_orig, bool unit_magnitude = false);

// Writes cos/sin of every pair angle for position pos: cs[2i] = cos, cs[2i+1] = sin.
void rope_angles(const RopeParams &p, int32_t pos, float *cs);
// Whether rope_angles stays finite at every position an int32 context can
// hold. A tiny freq_base or scaling factor (or frequency factor) passes as a
// positive number yet overflows float here, and every logit becomes NaN.
bool rope_angles_finite(const RopeParams &p);
// Rotates one head vector in place using angles from rope_angles.
void rope_apply(RopeType type, int32_t n_rot, const float *cs, float *x);

}  // namespace moe
