#include "model/rope.hpp"

#include <cmath>
#include <limits>

namespace moe {
namespace {

// Ratio of one pair's angle to the previous pair's.
float theta_scale_of(const RopeParams &p) { return std::pow(p.freq_base, -2.0f / float(p.n_rot)); }

bool within_float(double x) { return std::abs(x) <= double(std::numeric_limits<float>::max()); }

}  // namespace

void rope_angles(const RopeParams &p, int32_t pos, float *cs) {
    const int32_t half = p.n_rot / 2;
    const float theta_scale = theta_scale_of(p);
    float theta_extrap = float(pos);
    for (int32_t i = 0; i < half; ++i) {
        const float base = p.freq_factors ? theta_extrap / p.freq_factors[i] : theta_extrap;
        const float theta = p.freq_scale * base;
        cs[2 * i] = std::cos(theta);
        cs[2 * i + 1] = std::sin(theta);
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
