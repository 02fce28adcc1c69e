// Expert routing: the gating function over the router logits, top-k
// selection (optionally biased and limited to the best expert groups) and
// the post-processing of the selected weights (renormalisation, scale).
#pragma once

#include <cstdint>
#include <vector>

namespace moe {

// In place: subtract the max, expf, sum in double, multiply by 1/sum.
void softmax(float *x, int32_t n);
// The k largest of p[0..n) in descending order; ties go to the lower index.
// ids[slot] and w[slot] = p[ids[slot]].
void top_k(const float *p, int32_t n, int32_t k, int32_t *ids, float *w);
// w /= max(sum of w in slot order, 6.103515625e-5).
void renormalize(float *w, int32_t k);

// How router logits become expert weights (values of the GGUF key
// expert_gating_func): softmax or sigmoid over every expert before the top
// k, or (softmax_weight, gpt-oss) the top k of the raw logits and a softmax
// over those k.
enum class GatingFunc : int32_t { softmax = 1, sigmoid = 2, softmax_weight = 3 };

struct GatingSpec {
    GatingFunc func = GatingFunc::softmax;
    bool norm_weights = false;    // renormalise the k selected weights to sum 1
    float weights_scale = 1.0f;   // then multiply them by this (0 and 1 leave them as they are)
    // Group-limited selection when n_group > 1: the experts form n_group
    // consecutive groups, each scored by the sum of its two best selection
    // scores, and only the n_group_used best groups may be chosen.
    int32_t n_group = 1;
    int32_t n_group_used = 1;
};

// Preallocated room for route_experts (never allocates afterwards).
class RouterScratch {
public:
    RouterScratch(int32_t n_expert, int32_t n_group);

private:
    friend void route_experts(const GatingSpec &, float *, const float *, int32_t, int32_t, int32_t *, float *,
                              RouterScratch &);
    std::vector<float> selection_, group_score_, group_w_;
    std::vector<int32_t> group_ids_;
};

// One token's routing. logits (n values) become the probabilities in place;
// the k experts are chosen by probability plus selection_bias (null: none),
// within the allowed groups, and their weights are the unbiased
// probabilities, renormalised and scaled as the spec says. ids/w: k slots,
// best first; ties go to the lower expert id.
void route_experts(const GatingSpec &spec, float *logits, const float *selection_bias, int32_t n, int32_t k,
                   int32_t *ids, float *w, RouterScratch &scratch);

}  // namespace moe
