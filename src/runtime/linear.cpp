#include "runtime/linear.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "kernels/kernels.hpp"

namespace moe {
namespace {
// Rows per task: enough work to amortise the hand-out, small enough to balance.
constexpr int64_t kMinRowsPerTask = 16;
}  // namespace

Linear::Linear(ThreadPool &pool, bool exact, uint8_t *act, size_t act_capacity)
    : pool_(pool), exact_(exact), act_(act), act_capacity_(act_capacity) {}

void Linear::prepare(GgmlType type, int64_t cols, const float *x, size_t x_stride, int32_t n_tokens) {
    const size_t row = kernels::act_row_bytes(type, cols, exact_);
    if (row * size_t(n_tokens) > act_capacity_)
        fail(Status::internal, "activation buffer too small: %zu bytes for %d rows of %zu", act_capacity_,
             n_tokens, row);
    struct Job {
        GgmlType type;
        int64_t cols;
        const float *x;
        size_t x_stride;
        uint8_t *act;
        size_t row;
        bool exact;
    } job{type, cols, x, x_stride, act_, row, exact_};
    if (n_tokens == 1) {
        kernels::quantize_act(type, x, act_, cols, exact_);
    } else {
        pool_.parallel_for(n_tokens, [&job](int64_t t, int32_t) {
            kernels::quantize_act(job.type, job.x + size_t(t) * job.x_stride, job.act + size_t(t) * job.row,
                                  job.cols, job.exact);
        });
    }
    prepared_type_ = type;
    prepared_cols_ = cols;
    prepared_x_ = x;
    prepared_tokens_ = n_tokens;
    act_row_ = row;
}

void Linear::multiply(const MatrixView &w, float *y, size_t y_stride, const float *bias) {
    if (!prepared_x_ || w.type != prepared_type_ || w.cols != prepared_cols_)
        fail(Status::internal, "linear: activations not prepared for a %s matrix of %lld columns",
             type_traits(w.type).name, static_cast<long long>(w.cols));
    const int64_t rows = w.rows;
    const int64_t workers = pool_.size();
    int64_t n_tasks = std::max<int64_t>(1, std::min<int64_t>(workers * 4, rows / kMinRowsPerTask));
    const int64_t per_task = (rows + n_tasks - 1) / n_tasks;
    n_tasks = (rows + per_task - 1) / per_task;
    struct Job {
        const MatrixView *w;
        const uint8_t *act;
        size_t act_row;
        int32_t n_tokens;
        float *y;
        size_t y_stride;
        int64_t per_task;
        bool exact;
    } job{&w, act_, act_row_, prepared_tokens_, y, y_stride, per_task, exact_};
    auto body = [&job](int64_t task, int32_t) {
        const int64_t r0 = task * job.per_task;
        const int64_t r1 = std::min(job.w->rows, r0 + job.per_task);
        kernels::matmat_rows(job.w->type, job.w->cols, job.w->data, job.w->row_bytes, job.act, job.act_row,
                             job.n_tokens, job.y, job.y_stride, r0, r1, job.exact);
    };
    if (n_tasks == 1) {
        body(0, 0);
    } else {
        pool_.parallel_for(n_tasks, body);
    }
    if (bias) {
        for (int32_t t = 0; t < prepared_tokens_; ++t) {
            float *yt = y + size_t(t) * y_stride;
            for (int64_t r = 0; r < rows; ++r) yt[r] += bias[r];
        }
    }
}

void Linear::run(const MatrixView &w, const float *x, size_t x_stride, int32_t n_tokens, float *y,
                 size_t y_stride, const float *bias) {
    prepare(w.type, w.cols, x, x_stride, n_tokens);
    multiply(w, y, y_stride, bias);
}

}  // namespace moe
