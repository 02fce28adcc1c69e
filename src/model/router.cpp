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
    // One pass keeping the best `filled` candidates sorted in ids: a new one
    // goes before the first it beats. It beats a kept candidate only when
    // strictly larger, or a number against a NaN, so ties keep the lower
    // index first and NaNs come last.
    auto beats = [p](int32_t a, int32_t b) { return p[a] > p[b] || (std::isnan(p[b]) && !std::isnan(p[a])); };
    int32_t filled = 0;
    for (int32_t i = 0; i < n; ++i) {
        int32_t at = filled;
        while (at > 0 && beats(i, ids[at - 1])) --at;
        if (at >= k) continue;
        for (int32_t s = std::min(filled, k - 1); s > at; --s) ids[s] = ids[s - 1];
        ids[at] = i;
        if (filled < k) ++filled;
    }
    for (int32_t s = 0; s < k; ++s) w[s] = p[ids[s]];
}

void renormalize(float *w, int32_t k) {
    float sum = 0.0f;
    for (int32_t s = 0; s < k; ++s) sum += w[s];
    const float denom = std::max(sum, 6.103515625e-5f);
    for (int32_t s = 0; s < k; ++s) w[s] /= denom;
}

void select_experts(Gating gating, bool norm_topk, float *logits, int32_t n, int32_t k, int32_t *ids, float *w) {
    if (gating == Gating::softmax_topk) {
        top_k(logits, n, k, ids, w);
        softmax(w, k);
    } else {
        softmax(logits, n);
        top_k(logits, n, k, ids, w);
    }
    if (norm_topk) renormalize(w, k);
}

}  // namespace moe
