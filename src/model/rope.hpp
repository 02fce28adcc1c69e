// Rotary position embedding, NORMAL (pairs 2i, 2i+1) and NEOX (pairs i,
// i + n_rot/2). Angles follow ggml: theta_i = p * theta_scale^i computed by
// repeated float multiplication, divided by an optional per-pair frequency
// factor, times freq_scale. Dimensions at or beyond n_rot pass unchanged.
#pragma once

#include <cstdint>

#include "model/hparams.hpp"

namespace moe {

struct RopeParams {
    int32_t n_rot = 0;
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;
    const float *freq_factors = nullptr;  // n_rot/2 divisors, or null
};

// Writes cos/sin of every pair angle for position pos: cs[2i] = cos, cs[2i+1] = sin.
void rope_angles(const RopeParams &p, int32_t pos, float *cs);
// Whether rope_angles stays finite at every position an int32 context can
// hold. A tiny freq_base or scaling factor (or frequency factor) passes as a
// positive number yet overflows float here, and every logit becomes NaN.
bool rope_angles_finite(const RopeParams &p);
// Rotates one head vector in place using angles from rope_angles.
void rope_apply(RopeType type, int32_t n_rot, const float *cs, float *x);

}  // namespace moe
