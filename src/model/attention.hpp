// Causal scaled-dot-product attention of query heads against the cached
// keys/values of positions [first, pos] (first > 0 for a sliding window,
// whose ring in the cache must still hold them), summed in position order.
// GQA maps query head h to KV head h / (n_head / n_head_kv). A head may have
// a sink: a logit that joins the softmax's maximum and denominator but has
// no value, so the weights of the positions sum to less than 1. With a cache
// that keeps keys only (KvCache::values_in_keys, latent attention) a head's
// value is the first head_dim_v elements of its key.
#pragma once

#include <cstdint>

#include "model/kv_cache.hpp"

namespace moe {

struct AttentionShape {
    int32_t n_head = 0;
    int32_t n_head_kv = 0;
    int32_t head_dim_k = 0;
    int32_t head_dim_v = 0;
    float scale = 1.0f;  // applied to q.k
};

// Which cached positions a query attends to, and the sink logits.
struct AttentionSpan {
    int32_t first = 0;             // first position attended (0 without a window)
    const float *sinks = nullptr;  // one per query head of the call, or null
};

// out (head_dim_v floats) = softmax(q.K^T * scale) V over positions
// first..pos (with the head's sink, span.sinks[0], in the softmax if given).
// scores must hold pos + 1 floats. The result depends only on the inputs, not
// on how many tokens a step carries.
void attend_head(const KvCache &kv, int32_t layer, const AttentionShape &s, int32_t head, const float *q,
                 int32_t pos, float *scores, float *out, const AttentionSpan &span = {});

// attend_head for every query head that shares KV head `kv_head` (n_head /
// n_head_kv of them): q holds their queries head after head (head_dim_k
// apart), out receives their outputs (head_dim_v apart), scores must hold
// (n_head / n_head_kv) * (pos + 1) floats, span.sinks (if given) the group's
// sinks. Each key row is widened once for the whole group (a value row once
// per four heads, or eight on AVX-512) and keys are dotted eight positions at
// a time (sixteen on AVX-512); every output equals attend_head's bit for bit
// (same operations in the same order per element).
void attend_kv_group(const KvCache &kv, int32_t layer, const AttentionShape &s, int32_t kv_head, const float *q,
                     int32_t pos, float *scores, float *out, const AttentionSpan &span = {});

// The softmax weight exp(x) of a score x <= 0 below the maximum, as every
// attention path computes it (a fixed polynomial, not the library's expf, so
// that vector and scalar paths give the same bits); within a few ulp of exp.
// Exposed for tests.
float softmax_exp(float x);

}  // namespace moe
