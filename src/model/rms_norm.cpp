#include "model/rms_norm.hpp"

#include <cmath>

namespace moe {

void rms_norm(const float *x, const float *w, float *y, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += double(x[i] * x[i]);
    const float mean = float(sum / double(n));
    const float scale = 1.0f / std::sqrt(mean + eps);
    if (w) {
        for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
    } else {
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
    }
}

}  // namespace moe
