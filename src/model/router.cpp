#include "model/router.hpp"

#include <algorithm>
#include <cmath>

namespace moe {

void softmax(float *x, int32_t n) {
    float max = -INFINITY;
    for (int32_t i = 0; i < n; ++i) max = std::max(max, x[i]);
    double sum = 0.0;
    for (int32_t i = 0; i < n; ++i) {
        x[i] = std::exp(x[i] - max);
        sum += double(x[i]);
    }
    const float inv = float(1.0 / sum);
    for (int32_t i = 0; i < n; ++i) x[i] *= inv;
}

void top_k(const float *p, int32_t n, int32_t k, int32_t *ids, float *w) {
    // k is small (<= a few dozen): k passes over n keep this allocation-free.
    for (int32_t slot = 0; slot < k; ++slot) {
        int32_t best = -1;
        for (int32_t i = 0; i < n; ++i) {
            bool taken = false;
            for (int32_t s = 0; s < slot; ++s) taken |= ids[s] == i;
            if (taken) continue;
            // Strict '>' keeps the lower index on ties; NaN never wins over a number.
            if (best < 0 || p[i] > p[best] || (std::isnan(p[best]) && !std::isnan(p[i]))) best = i;
        }
        ids[slot] = best;
        w[slot] = p[best];
    }
}

void renormalize(float *w, int32_t k) {
    float sum = 0.0f;
    for (int32_t s = 0; s < k; ++s) sum += w[s];
    const float denom = std::max(sum, 6.103515625e-5f);
    for (int32_t s = 0; s < k; ++s) w[s] /= denom;
}

}  // namespace moe
