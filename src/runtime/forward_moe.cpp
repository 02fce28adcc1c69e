// MoE half of a layer: RMSNorm, router (gating, top-k, weight
// post-processing: model/router.hpp), routed experts computed in the order the ExpertSource
// delivers them, each writing its weighted output into a per-(token, slot)
// buffer, then a sum in top-k slot order so arrival order never changes the
// result; optional shared expert (sigmoid-gated or not); residual. Layers
// without experts run a dense SwiGLU FFN instead.
#include "common/error.hpp"
#include "common/monotonic_clock.hpp"
#include "model/rms_norm.hpp"
#include "model/router.hpp"
#include "model/swiglu.hpp"
#include "runtime/forward_pass.hpp"

namespace moe {
namespace {

// Ends the layer on every exit path so the source's pins are released even
// when a read fails part-way.
class LayerScope {
public:
    LayerScope(ExpertSource &src, int32_t layer) : src_(src), layer_(layer) {}
    ~LayerScope() {
        if (open_) {
            try {
                src_.end_layer(layer_);
            } catch (...) {
                // Already unwinding from the original error, which is the one to report.
            }
        }
    }
    void close() {
        open_ = false;
        src_.end_layer(layer_);
    }

private:
    ExpertSource &src_;
    int32_t layer_;
    bool open_ = true;
};

}  // namespace

void ForwardPass::route(const LayerWeights &lw, int32_t n_tokens) {
    const size_t NE = size_t(n_expert_), K = size_t(n_used_);
    linear_.run(lw.router, xn_.data(), size_t(n_embd_), n_tokens, router_.data(), NE,
                data_or_null(lw.router_bias));
    const float *selection_bias = data_or_null(lw.selection_bias);
    for (int32_t t = 0; t < n_tokens; ++t)
        route_experts(model_.traits().gating, &router_[size_t(t) * NE], selection_bias, n_expert_, n_used_,
                      &topk_ids_[size_t(t) * K], &topk_w_[size_t(t) * K], router_scratch_);
}

void ForwardPass::group_by_expert(int32_t n_tokens) {
    const size_t K = size_t(n_used_);
    std::fill(count_.begin(), count_.end(), 0);
    for (size_t i = 0, n = size_t(n_tokens) * K; i < n; ++i) ++count_[size_t(topk_ids_[i])];
    // Unique experts in ascending id order; entries grouped per expert in token order.
    int32_t n_unique = 0, next = 0;
    for (int32_t e = 0; e < n_expert_; ++e) {
        offset_[size_t(e)] = next;
        fill_[size_t(e)] = next;
        next += count_[size_t(e)];
        if (count_[size_t(e)] > 0) unique_[size_t(n_unique++)] = e;
    }
    for (int32_t t = 0; t < n_tokens; ++t) {
        for (int32_t s = 0; s < n_used_; ++s) {
            const int32_t e = topk_ids_[size_t(t) * K + size_t(s)];
            const int32_t at = fill_[size_t(e)]++;
            entry_token_[size_t(at)] = t;
            entry_slot_[size_t(at)] = s;
        }
    }
    fill_[0] = n_unique;  // reused as the unique count (fill_ is rebuilt every layer)
}

void ForwardPass::swiglu_ffn(const MatrixView &gate, const MatrixView &up, const MatrixView &down, int32_t n_tokens) {
    const size_t E = size_t(n_embd_);
    const int64_t n_ff = up.rows;
    linear_.prepare(gate.type, gate.cols, xn_.data(), E, n_tokens);
    linear_.multiply(gate, sh_gate_.data(), size_t(n_ff));
    if (!linear_.prepared_for(up)) linear_.prepare(up.type, up.cols, xn_.data(), E, n_tokens);
    linear_.multiply(up, sh_up_.data(), size_t(n_ff));
    swiglu(sh_gate_.data(), sh_up_.data(), sh_hidden_.data(), int64_t(n_tokens) * n_ff);
    linear_.run(down, sh_hidden_.data(), size_t(n_ff), n_tokens, sh_out_.data(), E);
}

void ForwardPass::shared_expert(const LayerWeights &lw, int32_t n_tokens) {
    const size_t E = size_t(n_embd_);
    swiglu_ffn(lw.shexp_gate, lw.shexp_up, lw.shexp_down, n_tokens);
    if (!lw.shexp_gate_inp) {  // ungated (deepseek2): added as it is
        for (size_t i = 0, n = size_t(n_tokens) * E; i < n; ++i) moe_out_[i] = moe_out_[i] + sh_out_[i];
        return;
    }
    linear_.run(lw.shexp_gate_inp, xn_.data(), E, n_tokens, sh_g_.data(), 1);
    for (int32_t t = 0; t < n_tokens; ++t) {
        const float g = sigmoid(sh_g_[size_t(t)]);
        float *out = &moe_out_[size_t(t) * E];
        const float *sh = &sh_out_[size_t(t) * E];
        for (size_t j = 0; j < E; ++j) out[j] = out[j] + sh[j] * g;
    }
}

void ForwardPass::moe_block(int32_t layer, int32_t n_tokens) {
    const LayerWeights &lw = model_.layer(layer);
    const size_t E = size_t(n_embd_), K = size_t(n_used_);
    for (int32_t t = 0; t < n_tokens; ++t)
        rms_norm(&x_[size_t(t) * E], lw.ffn_norm.data(), &xn_[size_t(t) * E], n_embd_, hp_.rms_eps);
    if (!lw.router) {
        // A dense layer (no experts): the next MoE layers' experts can still
        // be read ahead while its FFN computes.
        if (opt_.lookahead_layers > 0) predict_and_prefetch(layer, n_tokens);
        swiglu_ffn(lw.ffn_gate, lw.ffn_up, lw.ffn_down, n_tokens);
        for (size_t i = 0, n = size_t(n_tokens) * E; i < n; ++i) x_[i] = sh_out_[i] + x_[i];
        return;
    }
    route(lw, n_tokens);
    if (routing_trace_)
        for (int32_t t = 0; t < n_tokens; ++t)
            routing_trace_->record(traced_tokens_ + uint64_t(t), uint32_t(layer),
                                   std::span<const int32_t>(&topk_ids_[size_t(t) * K], K));
    group_by_expert(n_tokens);
    const int32_t n_unique = fill_[0];

    experts_.begin_layer(layer, std::span<const int32_t>(unique_.data(), size_t(n_unique)));
    LayerScope scope(experts_, layer);
    if (opt_.lookahead_layers > 0) predict_and_prefetch(layer, n_tokens);
    prepare_expert_inputs(lw, n_tokens);
    // Experts are computed a group at a time: everything available now (all
    // of them when experts are resident, the cache hits first when streaming),
    // then whatever landed while that group computed, so the reads overlap the
    // compute and each group costs two hand-offs to the threads, not each expert.
    for (int32_t done = 0; done < n_unique;) {
        const uint64_t t0 = monotonic_ns();
        int32_t n_ready = 0;
        ready_[size_t(n_ready++)] = experts_.next_ready();
        expert_wait_ns_ += monotonic_ns() - t0;
        while (done + n_ready < n_unique) {
            if (opt_.resident_experts) ready_[size_t(n_ready)] = experts_.next_ready();
            else if (!experts_.try_next_ready(ready_[size_t(n_ready)])) break;
            ++n_ready;
        }
        compute_experts(lw, ready_.data(), n_ready, n_tokens);
        done += n_ready;
    }
    scope.close();

    // Sum in top-k slot order: slot 0 first.
    for (int32_t t = 0; t < n_tokens; ++t) {
        float *out = &moe_out_[size_t(t) * E];
        const float *s0 = &slot_out_[size_t(t) * K * E];
        std::copy(s0, s0 + E, out);
        for (size_t s = 1; s < K; ++s) {
            const float *ys = &slot_out_[(size_t(t) * K + s) * E];
            for (size_t j = 0; j < E; ++j) out[j] += ys[j];
        }
    }
    if (lw.shexp_up) shared_expert(lw, n_tokens);
    for (size_t i = 0, n = size_t(n_tokens) * E; i < n; ++i) x_[i] = moe_out_[i] + x_[i];
}

}  // namespace moe
