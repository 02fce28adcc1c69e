// Router lookahead: layer L+1's router run on layer L's post-attention hidden
// state (normalised with layer L+1's ffn_norm) predicts the experts layer L+1
// will need; they are handed to the ExpertSource as a prefetch hint while
// layer L's experts compute, most likely first (by the best top-k rank any
// token gives them), so the source can keep only the ranks that tend to be
// right. Softmax is monotonic, so top-k of the raw router logits picks the
// same experts.
#include "model/rms_norm.hpp"
#include "model/router.hpp"
#include "runtime/forward_pass.hpp"

namespace moe {

void ForwardPass::predict_and_prefetch(int32_t next_layer, int32_t n_tokens) {
    const LayerWeights &next = model_.layer(next_layer);
    const size_t E = size_t(n_embd_), NE = size_t(n_expert_), K = size_t(n_used_);
    // x_ holds the post-attention residual of the current layer at this point.
    for (int32_t t = 0; t < n_tokens; ++t)
        rms_norm(&x_[size_t(t) * E], next.ffn_norm.data(), &la_xn_[size_t(t) * E], n_embd_, hp_.rms_eps);
    linear_.run(next.router, la_xn_.data(), E, n_tokens, la_router_.data(), NE,
                next.router_bias.empty() ? nullptr : next.router_bias.data());
    std::fill(la_mark_.begin(), la_mark_.end(), uint8_t(0));
    for (int32_t t = 0; t < n_tokens; ++t)
        top_k(&la_router_[size_t(t) * NE], n_expert_, n_used_, &la_ids_[size_t(t) * K], &la_w_[size_t(t) * K]);
    int32_t n = 0;
    for (size_t s = 0; s < K; ++s)
        for (int32_t t = 0; t < n_tokens; ++t) {
            const int32_t e = la_ids_[size_t(t) * K + s];
            if (la_mark_[size_t(e)]) continue;
            la_mark_[size_t(e)] = 1;
            la_unique_[size_t(n++)] = e;
        }
    experts_.prefetch(next_layer, std::span<const int32_t>(la_unique_.data(), size_t(n)));
}

}  // namespace moe
