#include "model/router.hpp"

#include <algorithm>
#include <cmath>

#include "model/swiglu.hpp"

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

RouterScratch::RouterScratch(int32_t n_expert, int32_t n_group)
    : selection_(size_t(std::max(n_expert, 0))),
      group_score_(size_t(std::max(n_group, 1))),
      group_w_(size_t(std::max(n_group, 1))),
      group_ids_(size_t(std::max(n_group, 1))) {}

namespace {

// Sets the selection scores of every expert outside the n_used best groups
// to -inf. A group's score is the sum of its two largest scores (its only
// score when it holds one expert).
void limit_to_groups(float *sel, int32_t n, int32_t n_group, int32_t n_used, float *group_score, float *group_w,
                     int32_t *group_ids) {
    const int32_t per = n / n_group;
    for (int32_t g = 0; g < n_group; ++g) {
        const float *s = sel + size_t(g) * size_t(per);
        int32_t best[2];
        float top[2];
        const int32_t k = std::min(per, 2);
        top_k(s, per, k, best, top);
        group_score[g] = k == 2 ? top[0] + top[1] : top[0];
    }
    top_k(group_score, n_group, n_used, group_ids, group_w);
    for (int32_t g = 0; g < n_group; ++g)
        if (std::find(group_ids, group_ids + n_used, g) == group_ids + n_used)
            std::fill(sel + size_t(g) * size_t(per), sel + size_t(g + 1) * size_t(per), -INFINITY);
}

}  // namespace

void route_experts(const GatingSpec &spec, float *logits, const float *selection_bias, int32_t n, int32_t k,
                   int32_t *ids, float *w, RouterScratch &scratch) {
    if (spec.func == GatingFunc::sigmoid)
        for (int32_t i = 0; i < n; ++i) logits[i] = sigmoid(logits[i]);
    else if (spec.func == GatingFunc::softmax)
        softmax(logits, n);
    // softmax_weight chooses on the raw logits (softmax is monotonic) and
    // softmaxes only the k chosen, below.
    const float *probs = logits;
    const bool grouped = spec.n_group > 1 && spec.n_group_used < spec.n_group;
    if (selection_bias || grouped) {
        // Selection and weights differ: choose on a copy, weigh with the probabilities.
        float *sel = scratch.selection_.data();
        for (int32_t i = 0; i < n; ++i) sel[i] = selection_bias ? probs[i] + selection_bias[i] : probs[i];
        if (grouped)
            limit_to_groups(sel, n, spec.n_group, spec.n_group_used, scratch.group_score_.data(),
                            scratch.group_w_.data(), scratch.group_ids_.data());
        top_k(sel, n, k, ids, w);
        for (int32_t s = 0; s < k; ++s) w[s] = probs[ids[s]];
    } else {
        top_k(probs, n, k, ids, w);
    }
    if (spec.func == GatingFunc::softmax_weight) softmax(w, k);
    if (spec.norm_weights) renormalize(w, k);
    if (spec.weights_scale != 0.0f && spec.weights_scale != 1.0f)
        for (int32_t s = 0; s < k; ++s) w[s] *= spec.weights_scale;
}

}  // namespace moe
