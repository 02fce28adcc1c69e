// Expert routing: softmax over the router logits, top-k selection and the
// optional renormalisation of the selected weights, or (gpt-oss) top-k of the
// raw logits and a softmax over the selected.
#pragma once

#include <cstdint>

namespace moe {

// How router logits become the routing weights of the selected experts.
enum class Gating : int32_t {
    softmax = 0,       // softmax over all experts, then the top k of it
    softmax_topk = 1,  // the top k raw logits, then softmax over those k
};

// In place: subtract the max, expf, sum in double, multiply by 1/sum.
void softmax(float *x, int32_t n);
// The k largest of p[0..n) in descending order; ties go to the lower index.
// ids[slot] and w[slot] = p[ids[slot]].
void top_k(const float *p, int32_t n, int32_t k, int32_t *ids, float *w);
// w /= max(sum of w in slot order, 6.103515625e-5).
void renormalize(float *w, int32_t k);
// One token's routing: the k experts chosen from n router logits (modified
// in place) into ids/w in slot order. softmax: softmax, top_k, then
// renormalize if norm_topk; softmax_topk: top_k of the logits, softmax of the k.
void select_experts(Gating gating, bool norm_topk, float *logits, int32_t n, int32_t k, int32_t *ids, float *w);

}  // namespace moe
