// Expert routing: softmax over the router logits, top-k selection and the
// optional renormalisation of the selected weights.
#pragma once

#include <cstdint>

namespace moe {

// In place: subtract the max, expf, sum in double, multiply by 1/sum.
void softmax(float *x, int32_t n);
// The k largest of p[0..n) in descending order; ties go to the lower index.
// ids[slot] and w[slot] = p[ids[slot]].
void top_k(const float *p, int32_t n, int32_t k, int32_t *ids, float *w);
// w /= max(sum of w in slot order, 6.103515625e-5).
void renormalize(float *w, int32_t k);

}  // namespace moe
