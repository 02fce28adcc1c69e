// Attention half of a layer: RMSNorm, Q/K/V projections (+bias), optional
// QK-norm, RoPE, KV cache write, causal attention per (token, KV head) for
// that KV head's query heads together (over a sliding window on the layers
// that have one, with sinks where given), output projection (+bias) and
// residual.
#include <algorithm>

#include "model/attention.hpp"
#include "model/rms_norm.hpp"
#include "model/rope.hpp"
#include "runtime/forward_pass.hpp"

namespace moe {
namespace {

void apply_qk_norm(QkNorm kind, const VectorF32 &w, float *v, int32_t n_heads, int32_t head_dim, float eps) {
    switch (kind) {
    case QkNorm::none: break;
    case QkNorm::per_head:
        for (int32_t h = 0; h < n_heads; ++h) rms_norm(v + h * head_dim, w.data(), v + h * head_dim, head_dim, eps);
        break;
    case QkNorm::full: rms_norm(v, w.data(), v, int64_t(n_heads) * head_dim, eps); break;
    }
}

}  // namespace

void ForwardPass::attention_block(int32_t layer, int32_t n_tokens, int32_t n_past) {
    const LayerWeights &lw = model_.layer(layer);
    const ArchTraits &tr = model_.traits();
    const size_t E = size_t(n_embd_);
    for (int32_t t = 0; t < n_tokens; ++t)
        rms_norm(&x_[size_t(t) * E], lw.attn_norm.data(), &xn_[size_t(t) * E], n_embd_, hp_.rms_eps);

    // Q, K and V share one activation conversion (and one parallel_for) when
    // their types take the same activation format.
    linear_.prepare(lw.wq.type, lw.wq.cols, xn_.data(), E, n_tokens);
    if (linear_.prepared_for(lw.wk) && linear_.prepared_for(lw.wv)) {
        const LinearOutput qkv[3] = {{&lw.wq, q_.data(), size_t(q_dim_), data_or_null(lw.bq)},
                                     {&lw.wk, k_.data(), size_t(k_dim_), data_or_null(lw.bk)},
                                     {&lw.wv, v_.data(), size_t(v_dim_), data_or_null(lw.bv)}};
        linear_.multiply_group(qkv);
    } else {
        linear_.multiply(lw.wq, q_.data(), size_t(q_dim_), data_or_null(lw.bq));
        if (!linear_.prepared_for(lw.wk)) linear_.prepare(lw.wk.type, lw.wk.cols, xn_.data(), E, n_tokens);
        linear_.multiply(lw.wk, k_.data(), size_t(k_dim_), data_or_null(lw.bk));
        if (!linear_.prepared_for(lw.wv)) linear_.prepare(lw.wv.type, lw.wv.cols, xn_.data(), E, n_tokens);
        linear_.multiply(lw.wv, v_.data(), size_t(v_dim_), data_or_null(lw.bv));
    }
    // Reads that landed during the projections make room for the next ones.
    experts_.progress();

    const int32_t n_rot = hp_.n_rot;
    for (int32_t t = 0; t < n_tokens; ++t) {
        float *q = &q_[size_t(t) * size_t(q_dim_)];
        float *k = &k_[size_t(t) * size_t(k_dim_)];
        apply_qk_norm(tr.qk_norm, lw.q_norm, q, hp_.n_head, hp_.head_dim_k, hp_.rms_eps);
        apply_qk_norm(tr.qk_norm, lw.k_norm, k, hp_.n_head_kv, hp_.head_dim_k, hp_.rms_eps);
        const float *cs = &rope_cs_[size_t(t) * size_t(n_rot)];
        for (int32_t h = 0; h < hp_.n_head; ++h) rope_apply(tr.rope_type, n_rot, cs, q + h * hp_.head_dim_k);
        for (int32_t h = 0; h < hp_.n_head_kv; ++h) rope_apply(tr.rope_type, n_rot, cs, k + h * hp_.head_dim_k);
        kv_.store(layer, n_past + t, k, &v_[size_t(t) * size_t(v_dim_)]);
    }

    attend(layer, n_tokens, n_past);
    experts_.progress();
    linear_.run(lw.wo, attn_.data(), size_t(o_dim_), n_tokens, tmp_.data(), E, data_or_null(lw.bo));
    for (size_t i = 0, n = size_t(n_tokens) * E; i < n; ++i) x_[i] = tmp_[i] + x_[i];
}

namespace {
constexpr int32_t kHeadsPerTask = 8;
}  // namespace

void ForwardPass::attend(int32_t layer, int32_t n_tokens, int32_t n_past) {
    // One task per (token, KV head, chunk of up to kHeadsPerTask of its query
    // heads): the heads of a task widen the keys and values once, and a wide
    // group (latent attention: every head shares one KV head) still spreads
    // over the threads. Each head's result does not depend on the chunking.
    const int32_t group = hp_.n_head / hp_.n_head_kv;
    const int32_t chunks = (group + kHeadsPerTask - 1) / kHeadsPerTask;
    struct Job {
        ForwardPass *self;
        int32_t layer, n_past, group, chunks;
        bool swa;
        const float *sinks;
    } job{this, layer, n_past, group, chunks, hp_.is_swa(layer), data_or_null(model_.layer(layer).attn_sinks)};
    pool_.parallel_for(int64_t(n_tokens) * hp_.n_head_kv * chunks, [&job](int64_t task, int32_t worker) {
        ForwardPass &fp = *job.self;
        const int64_t per_token = int64_t(fp.hp_.n_head_kv) * job.chunks;
        const int32_t t = int32_t(task / per_token);
        const int32_t kvh = int32_t(task % per_token / job.chunks);
        const int32_t first = int32_t(task % job.chunks) * kHeadsPerTask;
        AttentionShape s = fp.attn_shape_;
        s.n_head = std::min(kHeadsPerTask, job.group - first);
        s.n_head_kv = 1;  // the task's heads all read KV head kvh
        const size_t h0 = size_t(kvh) * size_t(job.group) + size_t(first);
        const float *q = &fp.q_[size_t(t) * size_t(fp.q_dim_) + h0 * size_t(fp.hp_.head_dim_k)];
        float *out = &fp.attn_[size_t(t) * size_t(fp.o_dim_) + h0 * size_t(fp.hp_.head_dim_v)];
        float *scores = &fp.scores_[size_t(worker) * size_t(job.group) * size_t(fp.opt_.n_ctx)];
        const int32_t pos = job.n_past + t;
        AttentionSpan span;
        // A sliding-window layer sees the last n_swa positions: key p is masked when pos - p >= n_swa.
        if (job.swa) span.first = std::max(0, pos - fp.hp_.n_swa + 1);
        if (job.sinks) span.sinks = job.sinks + h0;
        attend_kv_group(fp.kv_, job.layer, s, kvh, q, pos, scores, out, span);
    });
}

}  // namespace moe
