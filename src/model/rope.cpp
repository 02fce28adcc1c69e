#include "model/rope.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace moe {
namespace {

// Ratio of one pair's angle to the previous pair's.
float theta_scale_of(const RopeParams &p) { return std::pow(p.freq_base, -2.0f / float(p.n_rot)); }

bool within_float(double x) { return std::abs(x) <= double(std::numeric_limits<float>::max()); }

// The pair index where a wavelength of 2 pi / beta turns fit the original context.
float yarn_corr_dim(int32_t n_rot, int32_t n_ctx_orig, float beta, float base) {
    return float(n_rot) * std::log(float(n_ctx_orig) / (beta * 2.0f * float(M_PI))) / (2.0f * std::log(base));
}

float yarn_ramp(float low, float high, int32_t i) {
    const float y = (float(i) - low) / std::max(0.001f, high - low);
    return 1.0f - std::min(1.0f, std::max(0.0f, y));
}

}  // namespace

void rope_enable_yarn(RopeParams &p, int32_t n_ctx_orig, bool unit_magnitude) {
    constexpr float kBetaFast = 32.0f, kBetaSlow = 1.0f;
    p.ext_factor = 1.0f;
    p.yarn_low = std::max(0.0f, std::floor(yarn_corr_dim(p.n_rot, n_ctx_orig, kBetaFast, p.freq_base)));
    p.yarn_high = std::min(float(p.n_rot - 1), std::ceil(yarn_corr_dim(p.n_rot, n_ctx_orig, kBetaSlow, p.freq_base)));
    // llama.cpp's attention factor: 1 + 0.1 ln(factor) for a factor above 1,
    // and 1 otherwise (its get_mscale; the ramp still mixes the angles).
    // unit_magnitude keeps 1 (see rope.hpp).
    const float factor = 1.0f / p.freq_scale;
    p.mscale = !unit_magnitude && factor > 1.0f ? 1.0f + 0.1f * std::log(factor) : 1.0f;
}

void rope_angles(const RopeParams &p, int32_t pos, float *cs) {
    const int32_t half = p.n_rot / 2;
    const float theta_scale = theta_scale_of(p);
    float theta_extrap = float(pos);
    for (int32_t i = 0; i < half; ++i) {
        const float base = p.freq_factors ? theta_extrap / p.freq_factors[i] : theta_extrap;
        float theta = p.freq_scale * base;
        if (p.ext_factor != 0.0f) {
            const float mix = yarn_ramp(p.yarn_low, p.yarn_high, i) * p.ext_factor;
            theta = theta * (1.0f - mix) + base * mix;
        }
        cs[2 * i] = std::cos(theta) * p.mscale;
        cs[2 * i + 1] = std::sin(theta) * p.mscale;
        theta_extrap *= theta_scale;
    }
}

bool rope_angles_finite(const RopeParams &p) {
    const double theta_scale = theta_scale_of(p);
    // Every step of rope_angles, at the largest position, in double.
    double theta_extrap = std::numeric_limits<int32_t>::max();
    for (int32_t i = 0; i < p.n_rot / 2; ++i) {
        const double base = p.freq_factors ? theta_extrap / p.freq_factors[i] : theta_extrap;
        if (!within_float(theta_extrap) || !within_float(base) || !within_float(p.freq_scale * base)) return false;
        theta_extrap *= theta_scale;
    }
    return true;
}

void rope_apply(RopeType type, int32_t n_rot, const float *cs, float *x) {
    const int32_t half = n_rot / 2;
    for (int32_t i = 0; i < half; ++i) {
        const float c = cs[2 * i], s = cs[2 * i + 1];
        float *a, *b;
        if (type == RopeType::neox) {
            a = x + i;
            b = x + i + half;
        } else {
            a = x + 2 * i;
            b = x + 2 * i + 1;
        }
        const float x0 = *a, x1 = *b;
        *a = x0 * c - x1 * s;
        *b = x0 * s + x1 * c;
    }
}

}  // namespace moe
