// RMSNorm as ggml computes it: the sum of squares accumulates in double, the
// mean is rounded to float, y_i = (x_i * 1/sqrt(mean + eps)) * w_i.
#pragma once

#include <cstdint>

namespace moe {

// y may alias x. w may be null (no weight).
void rms_norm(const float *x, const float *w, float *y, int64_t n, float eps);

}  // namespace moe
