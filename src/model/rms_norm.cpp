#include "model/rms_norm.hpp"

#include <cmath>

namespace moe {

void rms_norm(const float *x, const float *w, float *y, int64_t n, float eps) {
    // Eight partial sums in a fixed order: one running sum would make every
    // addition wait for the previous one (a 4-cycle chain per element).
    constexpr int64_t kLanes = 8;
    double lane[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (int64_t j = 0; j < kLanes; ++j) lane[j] += double(x[i + j] * x[i + j]);
    for (; i < n; ++i) lane[i % kLanes] += double(x[i] * x[i]);
    const double sum = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
    const float mean = float(sum / double(n));
    const float scale = 1.0f / std::sqrt(mean + eps);
    if (w) {
        for (i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
    } else {
        for (i = 0; i < n; ++i) y[i] = x[i] * scale;
    }
}

}  // namespace moe
