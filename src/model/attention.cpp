#include "model/attention.hpp"

#include <algorithm>
#include <cmath>

namespace moe {

void attend_head(const KvCache &kv, int32_t layer, const AttentionShape &s, int32_t head, const float *q,
                 int32_t pos, float *scores, float *out) {
    const int32_t kv_head = head / (s.n_head / s.n_head_kv);
    const int32_t k_off = kv_head * s.head_dim_k;
    const int32_t v_off = kv_head * s.head_dim_v;
    float max = -INFINITY;
    for (int32_t j = 0; j <= pos; ++j) {
        scores[j] = kv.dot_k(layer, j, k_off, s.head_dim_k, q) * s.scale;
        max = std::max(max, scores[j]);
    }
    double sum = 0.0;
    for (int32_t j = 0; j <= pos; ++j) {
        scores[j] = std::exp(scores[j] - max);
        sum += double(scores[j]);
    }
    const float inv = float(1.0 / sum);
    std::fill(out, out + s.head_dim_v, 0.0f);
    for (int32_t j = 0; j <= pos; ++j) kv.axpy_v(layer, j, v_off, s.head_dim_v, scores[j] * inv, out);
}

}  // namespace moe
