#include "model/rope.hpp"

#include <cmath>

namespace moe {

void rope_angles(const RopeParams &p, int32_t pos, float *cs) {
    const int32_t half = p.n_rot / 2;
    const float theta_scale = std::pow(p.freq_base, -2.0f / float(p.n_rot));
    float theta_extrap = float(pos);
    for (int32_t i = 0; i < half; ++i) {
        const float base = p.freq_factors ? theta_extrap / p.freq_factors[i] : theta_extrap;
        const float theta = p.freq_scale * base;
        cs[2 * i] = std::cos(theta);
        cs[2 * i + 1] = std::sin(theta);
        theta_extrap *= theta_scale;
    }
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
