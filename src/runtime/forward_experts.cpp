// Routed experts of one layer, computed a group at a time: every expert the
// source has delivered so far (all of them at once when experts are resident)
// is split into row chunks that both threads take from one parallel_for, so a
// small expert never leaves a thread idle and a layer costs two hand-offs
// instead of several per expert.
//
// Phase 1, per (expert, chunk of n_ff rows): gate and up rows of the chunk for
// all of the expert's tokens, plus their bias rows if the architecture has
// them, then the activation; the task that finishes an expert's last chunk
// converts that expert's hidden rows for the down matrix.
// Phase 2, per (expert, chunk of n_embd rows): down rows (plus bias), scaled
// by the router weight into the (token, slot) output. Every output element comes
// from the same kernel call on the same activation rows however the work is
// split, so results do not depend on grouping, threads or tokens per step.
#include <algorithm>
#include <cstring>

#include "common/error.hpp"
#include "kernels/kernels.hpp"
#include "model/swiglu.hpp"
#include "runtime/forward_pass.hpp"

namespace moe {
namespace {

MatrixView expert_matrix(const ExpertMatrixLayout &m, const uint8_t *data) {
    MatrixView v;
    v.data = data;
    v.type = m.type;
    v.cols = m.cols;
    v.rows = m.rows;
    v.row_bytes = size_t(m.expert_stride / uint64_t(m.rows));
    return v;
}

}  // namespace

void ForwardPass::prepare_expert_inputs(const LayerWeights &lw, int32_t n_tokens) {
    const ExpertLayerLayout &lay = lw.experts;
    if (lay.gate.rows == 0) fail(Status::unsupported, "layer experts without a gate projection are not supported");
    const size_t E = size_t(n_embd_);
    const bool exact = opt_.exact;
    xq_row_gate_ = kernels::act_row_bytes(lay.gate.type, lay.gate.cols, exact);
    xq_row_up_ = kernels::act_row_bytes(lay.up.type, lay.up.cols, exact);
    up_shares_gate_input_ =
        kernels::act_type(lay.gate.type, exact) == kernels::act_type(lay.up.type, exact) && lay.gate.cols == lay.up.cols;
    struct Job {
        ForwardPass *self;
        const ExpertLayerLayout *lay;
    } job{this, &lay};
    auto convert = [&job, E, exact](int64_t t, int32_t) {
        ForwardPass &fp = *job.self;
        const float *x = &fp.xn_[size_t(t) * E];
        kernels::quantize_act(job.lay->gate.type, x, &fp.xq_gate_[size_t(t) * fp.xq_row_gate_], job.lay->gate.cols,
                              exact);
        if (!fp.up_shares_gate_input_)
            kernels::quantize_act(job.lay->up.type, x, &fp.xq_up_[size_t(t) * fp.xq_row_up_], job.lay->up.cols,
                                  exact);
    };
    if (n_tokens == 1) convert(0, 0);
    else pool_.parallel_for(n_tokens, convert);
}

void ForwardPass::compute_experts(const LayerWeights &lw, const ReadyExpert *group, int32_t n_group,
                                  int32_t n_tokens) {
    const ExpertLayerLayout &lay = lw.experts;
    const size_t E = size_t(n_embd_), K = size_t(n_used_);
    const int64_t n_ff = lay.up.rows;
    int32_t n_entries = 0;
    for (int32_t g = 0; g < n_group; ++g) {
        const int32_t e = group[g].expert;
        if (e < 0 || e >= n_expert_ || count_[size_t(e)] == 0)
            fail(Status::internal, "expert source returned expert %d, which was not requested", e);
        n_entries += count_[size_t(e)];
    }
    const uint8_t *xq_up = up_shares_gate_input_ ? xq_gate_.data() : xq_up_.data();
    // Multi-token steps: each expert's tokens' input rows side by side, in entry order.
    if (n_tokens > 1) {
        for (int32_t g = 0; g < n_group; ++g) {
            const int32_t e = group[g].expert, first = offset_[size_t(e)];
            for (int32_t i = first; i < first + count_[size_t(e)]; ++i) {
                const size_t t = size_t(entry_token_[size_t(i)]);
                std::memcpy(&eq_gate_[size_t(i) * xq_row_gate_], &xq_gate_[t * xq_row_gate_], xq_row_gate_);
                if (!up_shares_gate_input_)
                    std::memcpy(&eq_up_[size_t(i) * xq_row_up_], &xq_up[t * xq_row_up_], xq_row_up_);
            }
        }
    }

    const int32_t workers = pool_.size();
    const double tokens_per_expert = double(n_entries) / double(n_group);
    const size_t gate_up_row = size_t(lay.gate.expert_stride / uint64_t(lay.gate.rows)) +
                               size_t(lay.up.expert_stride / uint64_t(lay.up.rows));
    const int64_t per_a = std::min<int64_t>(
        n_ff, rows_per_task(n_ff * n_group, size_t(double(gate_up_row) * tokens_per_expert), workers));
    const int64_t chunks_a = (n_ff + per_a - 1) / per_a;
    const size_t down_row = size_t(lay.down.expert_stride / uint64_t(lay.down.rows));
    const int64_t per_b = std::min<int64_t>(
        lay.down.rows, rows_per_task(lay.down.rows * n_group, size_t(double(down_row) * tokens_per_expert), workers));
    const int64_t chunks_b = (lay.down.rows + per_b - 1) / per_b;
    const size_t h_row = kernels::act_row_bytes(lay.down.type, lay.down.cols, opt_.exact);
    for (int32_t g = 0; g < n_group; ++g) chunks_left_[size_t(g)].store(int32_t(chunks_a), std::memory_order_relaxed);

    struct Job {
        ForwardPass *self;
        const ExpertLayerLayout *lay;
        const ReadyExpert *group;
        const uint8_t *xq_up;
        const float *gate_bias, *up_bias, *down_bias;
        ExpertAct act;
        int64_t n_ff, per_a, chunks_a, per_b, chunks_b;
        size_t E, K, h_row;
        bool multi, exact;
    } job{this, &lay, group, xq_up, data_or_null(lw.exp_gate_bias), data_or_null(lw.exp_up_bias),
          data_or_null(lw.exp_down_bias), model_.traits().expert_act, n_ff, per_a, chunks_a, per_b, chunks_b, E, K,
          h_row, n_tokens > 1, opt_.exact};

    pool_.parallel_for(int64_t(n_group) * chunks_a, [&job](int64_t task, int32_t worker) {
        ForwardPass &fp = *job.self;
        const int32_t g = int32_t(task / job.chunks_a);
        const int64_t r0 = (task % job.chunks_a) * job.per_a, r1 = std::min(job.n_ff, r0 + job.per_a);
        const ReadyExpert &ready = job.group[g];
        const int32_t e = ready.expert, first = fp.offset_[size_t(e)], n = fp.count_[size_t(e)];
        const MatrixView gate = expert_matrix(job.lay->gate, ready.view.gate);
        const MatrixView up = expert_matrix(job.lay->up, ready.view.up);
        const uint8_t *a_gate = job.multi ? &fp.eq_gate_[size_t(first) * fp.xq_row_gate_] : fp.xq_gate_.data();
        const uint8_t *a_up = !job.multi                 ? job.xq_up
                              : fp.up_shares_gate_input_ ? a_gate
                                                         : &fp.eq_up_[size_t(first) * fp.xq_row_up_];
        const size_t nf = size_t(job.n_ff);
        float *g_out = &fp.gate_[size_t(first) * nf];
        float *u_out = &fp.up_[size_t(first) * nf];
        float *h_out = &fp.hidden_[size_t(first) * nf];
        kernels::matmat_rows(gate.type, gate.cols, gate.data, gate.row_bytes, a_gate, fp.xq_row_gate_, n, g_out, nf,
                             r0, r1, job.exact);
        kernels::matmat_rows(up.type, up.cols, up.data, up.row_bytes, a_up, fp.xq_row_up_, n, u_out, nf, r0, r1,
                             job.exact);
        const float *gate_bias = job.gate_bias ? job.gate_bias + size_t(e) * nf + size_t(r0) : nullptr;
        const float *up_bias = job.up_bias ? job.up_bias + size_t(e) * nf + size_t(r0) : nullptr;
        for (int32_t i = 0; i < n; ++i)
            expert_activation(job.act, g_out + size_t(i) * nf + size_t(r0), u_out + size_t(i) * nf + size_t(r0),
                              gate_bias, up_bias, h_out + size_t(i) * nf + size_t(r0), r1 - r0);
        // The last chunk of this expert converts its hidden rows for the down matrix.
        if (fp.chunks_left_[size_t(g)].fetch_sub(1, std::memory_order_acq_rel) == 1) {
            for (int32_t i = 0; i < n; ++i)
                kernels::quantize_act(job.lay->down.type, h_out + size_t(i) * nf,
                                      &fp.hq_[size_t(first + i) * job.h_row], job.n_ff, job.exact);
        }
        // The calling thread owns the source: it keeps the device fed between tasks.
        if (worker == 0) fp.experts_.progress();
    });

    pool_.parallel_for(int64_t(n_group) * chunks_b, [&job](int64_t task, int32_t worker) {
        ForwardPass &fp = *job.self;
        const int32_t g = int32_t(task / job.chunks_b);
        const ReadyExpert &ready = job.group[g];
        const MatrixView down = expert_matrix(job.lay->down, ready.view.down);
        const int64_t r0 = (task % job.chunks_b) * job.per_b, r1 = std::min(down.rows, r0 + job.per_b);
        const int32_t e = ready.expert, first = fp.offset_[size_t(e)], n = fp.count_[size_t(e)];
        const size_t n_embd = job.E;
        float *y = &fp.down_[size_t(first) * n_embd];
        kernels::matmat_rows(down.type, down.cols, down.data, down.row_bytes, &fp.hq_[size_t(first) * job.h_row],
                             job.h_row, n, y, n_embd, r0, r1, job.exact);
        const float *bias = job.down_bias ? job.down_bias + size_t(e) * n_embd : nullptr;
        for (int32_t i = 0; i < n; ++i) {
            const size_t t = size_t(fp.entry_token_[size_t(first + i)]), s = size_t(fp.entry_slot_[size_t(first + i)]);
            const float w = fp.topk_w_[t * job.K + s];
            const float *src = y + size_t(i) * n_embd;
            float *dst = &fp.slot_out_[(t * job.K + s) * n_embd];
            // (W_down h + b_down) w: the bias belongs to the expert, before its routing weight.
            if (bias)
                for (int64_t j = r0; j < r1; ++j) dst[j] = (src[j] + bias[j]) * w;
            else
                for (int64_t j = r0; j < r1; ++j) dst[j] = src[j] * w;
        }
        if (worker == 0) fp.experts_.progress();
    });
}

}  // namespace moe
