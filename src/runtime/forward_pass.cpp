#include "runtime/forward_pass.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "common/monotonic_clock.hpp"
#include "kernels/kernels.hpp"
#include "model/rms_norm.hpp"
#include "runtime/head_linear.hpp"

namespace moe {
namespace {

// Calls see(type, cols) for every matrix the forward pass multiplies by.
template <typename See>
void for_each_matrix_shape(const Model &m, See see) {
    auto see_m = [&](const MatrixView &w) {
        if (w.cols > 0) see(w.type, w.cols);
    };
    const ModelWeights &w = m.weights();
    see_m(w.token_embd);
    see_m(w.output);
    for (const LayerWeights &l : w.layers) {
        LayerWeights::for_each_matrix(l, see_m);
        for (const ExpertMatrixLayout *e : {&l.experts.gate, &l.experts.up, &l.experts.down})
            if (e->cols > 0) see(e->type, e->cols);
    }
}

// Largest converted-activation row any matrix of the model needs.
size_t max_act_row_bytes(const Model &m, bool exact) {
    size_t best = 0;
    for_each_matrix_shape(m, [&](GgmlType type, int64_t cols) {
        best = std::max(best, kernels::act_row_bytes(type, cols, exact));
    });
    return best;
}

// Largest kernel scratch one matrix call of up to `max_tokens` tokens takes.
size_t max_kernel_scratch(const Model &m, int32_t max_tokens, bool exact) {
    size_t best = 0;
    for_each_matrix_shape(m, [&](GgmlType type, int64_t cols) {
        best = std::max(best, kernels::matmat_scratch_bytes(type, cols, max_tokens, exact));
    });
    return best;
}

}  // namespace

ForwardPass::ForwardPass(const Model &model, ExpertSource &experts, ThreadPool &pool, const ForwardOptions &opt)
    : model_(model),
      hp_(model.hparams()),
      experts_(experts),
      pool_(pool),
      opt_(opt),
      kv_(kv_layout_for(model.hparams(), opt.n_ctx, opt.max_batch), opt.exact),
      act_(max_act_row_bytes(model, opt.exact) * size_t(std::max(1, opt.max_batch)) + 64),
      linear_(pool, opt.exact, act_.data(), act_.size()),
      router_scratch_(model.hparams().n_expert, model.traits().gating.n_group) {
    if (opt.max_batch <= 0 || opt.n_ctx <= 0) fail(Status::invalid_argument, "forward pass: bad n_ctx/max_batch");
    const size_t B = size_t(opt.max_batch);
    n_embd_ = hp_.n_embd;
    q_dim_ = int64_t(hp_.n_head) * hp_.head_dim_k;
    k_dim_ = int64_t(hp_.n_head_kv) * hp_.head_dim_k;
    v_dim_ = int64_t(hp_.n_head_kv) * hp_.head_dim_v;
    o_dim_ = int64_t(hp_.n_head) * hp_.head_dim_v;
    n_expert_ = hp_.n_expert;
    n_used_ = hp_.n_expert_used;
    n_ff_max_ = 0;
    n_ff_shared_max_ = 0;
    for (const LayerWeights &l : model.weights().layers) {
        n_ff_max_ = std::max({n_ff_max_, l.experts.gate.rows, l.experts.up.rows});
        n_ff_shared_max_ = std::max({n_ff_shared_max_, l.shexp_up.rows, l.ffn_up.rows});
    }

    attn_shape_.n_head = hp_.n_head;
    attn_shape_.n_head_kv = hp_.n_head_kv;
    attn_shape_.head_dim_k = hp_.head_dim_k;
    attn_shape_.head_dim_v = hp_.head_dim_v;
    attn_shape_.scale = hp_.attention_scale();
    rope_ = model.rope_params();

    const size_t E = size_t(n_embd_), K = size_t(n_used_);
    x_.assign(B * E, 0.0f);
    xn_.assign(B * E, 0.0f);
    q_.assign(B * size_t(q_dim_), 0.0f);
    k_.assign(B * size_t(k_dim_), 0.0f);
    v_.assign(B * size_t(v_dim_), 0.0f);
    attn_.assign(B * size_t(o_dim_), 0.0f);
    tmp_.assign(B * E, 0.0f);
    rope_cs_.assign(B * size_t(hp_.n_rot), 0.0f);
    // Per worker: the scores of every query head of one KV head.
    scores_.assign(size_t(pool.size()) * size_t(hp_.n_head / std::max(1, hp_.n_head_kv)) * size_t(opt.n_ctx), 0.0f);
    router_.assign(B * size_t(n_expert_), 0.0f);
    topk_ids_.assign(B * K, 0);
    topk_w_.assign(B * K, 0.0f);
    slot_out_.assign(B * K * E, 0.0f);
    moe_out_.assign(B * E, 0.0f);
    unique_.assign(size_t(n_expert_), 0);
    count_.assign(size_t(n_expert_), 0);
    offset_.assign(size_t(n_expert_), 0);
    fill_.assign(size_t(n_expert_), 0);
    entry_token_.assign(B * K, 0);
    entry_slot_.assign(B * K, 0);
    gate_.assign(B * K * size_t(n_ff_max_), 0.0f);
    up_.assign(B * K * size_t(n_ff_max_), 0.0f);
    hidden_.assign(B * K * size_t(n_ff_max_), 0.0f);
    down_.assign(B * K * E, 0.0f);
    size_t in_row = 0, hidden_row = 0;
    for (const LayerWeights &l : model.weights().layers) {
        for (const ExpertMatrixLayout *m : {&l.experts.gate, &l.experts.up})
            if (m->cols > 0) in_row = std::max(in_row, kernels::act_row_bytes(m->type, m->cols, opt.exact));
        if (l.experts.down.cols > 0)
            hidden_row = std::max(hidden_row, kernels::act_row_bytes(l.experts.down.type, l.experts.down.cols, opt.exact));
    }
    xq_gate_.assign(B * in_row, 0);
    xq_up_.assign(B * in_row, 0);
    if (B > 1) {
        eq_gate_.assign(B * K * in_row, 0);
        eq_up_.assign(B * K * in_row, 0);
    }
    hq_.assign(B * K * hidden_row, 0);
    ready_.assign(size_t(n_expert_), ReadyExpert{});
    chunks_left_ = std::make_unique<std::atomic<int32_t>[]>(size_t(n_expert_));
    if (n_ff_shared_max_ > 0) {
        sh_gate_.assign(B * size_t(n_ff_shared_max_), 0.0f);
        sh_up_.assign(B * size_t(n_ff_shared_max_), 0.0f);
        sh_hidden_.assign(B * size_t(n_ff_shared_max_), 0.0f);
        sh_out_.assign(B * E, 0.0f);
        sh_g_.assign(B, 0.0f);
    }
    if (opt.lookahead_layers > 0) {
        la_xn_.assign(B * E, 0.0f);
        la_router_.assign(B * size_t(n_expert_), 0.0f);
        la_w_.assign(B * K, 0.0f);
        la_ids_.assign(B * K, 0);
        la_unique_.assign(size_t(n_expert_), 0);
        la_mark_.assign(size_t(n_expert_), 0);
    }
    if (hp_.latent_attention()) {
        q_full_.assign(B * size_t(hp_.n_head) * size_t(hp_.head_dim_k_mla), 0.0f);
        q_latent_.assign(B * size_t(hp_.q_lora_rank), 0.0f);
        mla_out_.assign(B * size_t(hp_.n_head) * size_t(hp_.head_dim_v_mla), 0.0f);
        size_t head_act = 0;
        for (const LayerWeights &l : model.weights().layers)
            for (const MatrixView *w : {&l.wk_b, &l.wv_b})
                if (*w) head_act = std::max(head_act, head_act_bytes(*w, hp_.n_head, opt.max_batch, opt.exact));
        mla_act_.assign(head_act, 0);
    }
    // Each compute thread sizes its kernel scratch now, so that no step
    // allocates (a thread's first matrix call would otherwise).
    const size_t scratch = max_kernel_scratch(model, opt.max_batch, opt.exact);
    pool.on_each_worker([scratch](int64_t, int32_t) { kernels::reserve_scratch(scratch); });
}

size_t ForwardPass::scratch_bytes() const {
    size_t f = 0;
    for (const std::vector<float> *v :
         {&x_, &xn_, &q_, &k_, &v_, &attn_, &tmp_, &rope_cs_, &scores_, &router_, &topk_w_, &slot_out_, &moe_out_,
          &gate_, &up_, &hidden_, &down_, &sh_gate_, &sh_up_, &sh_hidden_, &sh_out_, &sh_g_, &la_xn_,
          &la_router_, &la_w_, &q_full_, &q_latent_, &mla_out_})
        f += v->size();
    size_t i = 0;
    for (const std::vector<int32_t> *v :
         {&topk_ids_, &unique_, &count_, &offset_, &entry_token_, &entry_slot_, &fill_, &la_ids_, &la_unique_})
        i += v->size();
    size_t b = act_.size() + la_mark_.size();
    for (const std::vector<uint8_t> *v : {&xq_gate_, &xq_up_, &eq_gate_, &eq_up_, &hq_, &mla_act_}) b += v->size();
    return f * sizeof(float) + i * sizeof(int32_t) + b;
}

void ForwardPass::run(const int32_t *tokens, int32_t n_tokens, int32_t n_past, float *logits, Logits which) {
    if (n_tokens <= 0 || n_tokens > opt_.max_batch || n_past < 0 || n_past + n_tokens > opt_.n_ctx)
        fail(Status::internal, "forward pass: %d tokens at position %d do not fit (batch %d, n_ctx %d)", n_tokens,
             n_past, opt_.max_batch, opt_.n_ctx);
    // Idle workers spin for the step spin time (MOESTREAM_STEP_SPIN_US), if
    // one is set, through the waits for expert reads.
    const ThreadPool::StepScope step(pool_);
    const size_t E = size_t(n_embd_);
    const MatrixView &embd = model_.weights().token_embd;
    for (int32_t t = 0; t < n_tokens; ++t)
        kernels::dequantize_row(embd.type, embd.row(tokens[t]), &x_[size_t(t) * E], n_embd_);
    // Rotation angles depend only on the position: computed once per step for all layers.
    for (int32_t t = 0; t < n_tokens; ++t) rope_angles(rope_, n_past + t, &rope_cs_[size_t(t) * size_t(hp_.n_rot)]);

    for (int32_t l = 0; l < hp_.n_layer; ++l) {
        const uint64_t t0 = monotonic_ns();
        if (hp_.latent_attention()) latent_attention_block(l, n_tokens, n_past);
        else attention_block(l, n_tokens, n_past);
        const uint64_t t1 = monotonic_ns(), wait0 = expert_wait_ns_;
        moe_block(l, n_tokens);
        const uint64_t t2 = monotonic_ns(), waited = expert_wait_ns_ - wait0;
        times_.attention_ns += t1 - t0;
        times_.moe_ns += t2 - t1 > waited ? t2 - t1 - waited : 0;
    }
    if (logits && which == Logits::every) output_head(0, n_tokens, logits);
    else if (logits) output_head(n_tokens - 1, 1, logits);
    traced_tokens_ += uint64_t(n_tokens);
}

void ForwardPass::output_head(int32_t first, int32_t count, float *logits) {
    const size_t E = size_t(n_embd_);
    // xn_ is free once the last layer has run.
    for (int32_t i = 0; i < count; ++i)
        rms_norm(&x_[size_t(first + i) * E], model_.weights().output_norm.data(), &xn_[size_t(i) * E], n_embd_,
                 hp_.rms_eps);
    linear_.run(model_.weights().output, xn_.data(), E, count, logits, size_t(hp_.n_vocab));
}

}  // namespace moe
