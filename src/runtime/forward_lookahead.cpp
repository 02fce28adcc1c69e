// Router lookahead: the routers of layers L+1 .. L+D run on layer L's
// post-attention hidden state (each normalised with its own layer's
// ffn_norm) predict the experts those layers will need; they are handed to
// the ExpertSource as prefetch hints while layer L's experts compute, nearest
// layer first and most likely first within a layer (by the best top-k rank any
// token gives them), so the source can keep only the (distance, rank) pairs
// that tend to be right. The residual stream changes little from one layer to
// the next, so the first ranks stay reliable a few layers ahead, and those
// reads keep the device busy across layers whose own misses are few.
// The prediction is the routing the layer itself would do from that state
// (gating, selection bias and group limit included).
#include <algorithm>

#include "model/rms_norm.hpp"
#include "model/router.hpp"
#include "runtime/forward_pass.hpp"

namespace moe {

void ForwardPass::predict_and_prefetch(int32_t layer, int32_t n_tokens) {
    const size_t E = size_t(n_embd_), NE = size_t(n_expert_), K = size_t(n_used_);
    const int32_t last = std::min(hp_.n_layer - 1, layer + opt_.lookahead_layers);
    for (int32_t target = layer + 1; target <= last; ++target) {
        const LayerWeights &next = model_.layer(target);
        if (!next.router) continue;  // a dense layer: nothing to read ahead
        // x_ holds the post-attention residual of the current layer at this point.
        for (int32_t t = 0; t < n_tokens; ++t)
            rms_norm(&x_[size_t(t) * E], next.ffn_norm.data(), &la_xn_[size_t(t) * E], n_embd_, hp_.rms_eps);
        linear_.run(next.router, la_xn_.data(), E, n_tokens, la_router_.data(), NE,
                    data_or_null(next.router_bias));
        std::fill(la_mark_.begin(), la_mark_.end(), uint8_t(0));
        const float *selection_bias = data_or_null(next.selection_bias);
        for (int32_t t = 0; t < n_tokens; ++t)
            route_experts(model_.traits().gating, &la_router_[size_t(t) * NE], selection_bias, n_expert_, n_used_,
                          &la_ids_[size_t(t) * K], &la_w_[size_t(t) * K], router_scratch_);
        int32_t n = 0;
        for (size_t s = 0; s < K; ++s)
            for (int32_t t = 0; t < n_tokens; ++t) {
                const int32_t e = la_ids_[size_t(t) * K + s];
                if (la_mark_[size_t(e)]) continue;
                la_mark_[size_t(e)] = 1;
                la_unique_[size_t(n++)] = e;
            }
        experts_.prefetch(target, std::span<const int32_t>(la_unique_.data(), size_t(n)), target - layer);
    }
}

}  // namespace moe
