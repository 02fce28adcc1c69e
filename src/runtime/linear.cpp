#include "runtime/linear.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "kernels/kernels.hpp"

namespace moe {
namespace {
// Weight bytes per task: large enough that handing a task out (one atomic
// increment) is noise, small enough that the last task leaves the other
// threads idle for only a few microseconds.
constexpr size_t kTaskBytes = size_t{256} << 10;
constexpr int64_t kMinRowsPerTask = 16;
// Most matrices one multiply_group call runs (q/k/v, gate/up, ...).
constexpr size_t kMaxGroup = 8;
}  // namespace

int64_t rows_per_task(int64_t rows, size_t row_bytes, int32_t workers) {
    if (rows <= 0) return 1;
    if (workers <= 1) return rows;
    const int64_t by_bytes = std::max<int64_t>(1, int64_t(kTaskBytes / std::max<size_t>(1, row_bytes)));
    const int64_t by_balance = (rows + 4 * workers - 1) / (4 * int64_t(workers));
    return std::max(kMinRowsPerTask, std::min(by_bytes, by_balance));
}

Linear::Linear(ThreadPool &pool, bool exact, uint8_t *act, size_t act_capacity)
    : pool_(pool), exact_(exact), act_(act), act_capacity_(act_capacity) {}

bool Linear::prepared_for(const MatrixView &w) const {
    return prepared_x_ && w.cols == prepared_cols_ && kernels::act_type(w.type, exact_) == prepared_act_type_ &&
           w.cols % type_traits(w.type).block_elems == 0;
}

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
    prepared_act_type_ = kernels::act_type(type, exact_);
    prepared_cols_ = cols;
    prepared_x_ = x;
    prepared_tokens_ = n_tokens;
    act_row_ = row;
}

void Linear::multiply(const MatrixView &w, float *y, size_t y_stride, const float *bias) {
    const LinearOutput out{&w, y, y_stride, bias};
    multiply_group(std::span<const LinearOutput>(&out, 1));
}

void Linear::multiply_group(std::span<const LinearOutput> outputs) {
    if (outputs.size() > kMaxGroup) fail(Status::internal, "linear: %zu matrices in one group", outputs.size());
    const int32_t workers = pool_.size();
    struct Part {
        const LinearOutput *out;
        int64_t per_task;
        int64_t first_task;
    };
    Part parts[kMaxGroup];
    int64_t n_tasks = 0;
    for (size_t i = 0; i < outputs.size(); ++i) {
        const MatrixView &w = *outputs[i].w;
        if (!prepared_for(w))
            fail(Status::internal, "linear: activations not prepared for a %s matrix of %lld columns",
                 type_traits(w.type).name, static_cast<long long>(w.cols));
        const int64_t per = rows_per_task(w.rows, w.row_bytes * size_t(prepared_tokens_), workers);
        parts[i] = Part{&outputs[i], per, n_tasks};
        n_tasks += (w.rows + per - 1) / per;
    }
    struct Job {
        const Part *parts;
        size_t n_parts;
        const uint8_t *act;
        size_t act_row;
        int32_t n_tokens;
        bool exact;
    } job{parts, outputs.size(), act_, act_row_, prepared_tokens_, exact_};
    auto body = [&job](int64_t task, int32_t) {
        size_t p = job.n_parts - 1;
        while (job.parts[p].first_task > task) --p;
        const Part &part = job.parts[p];
        const MatrixView &w = *part.out->w;
        const int64_t r0 = (task - part.first_task) * part.per_task;
        const int64_t r1 = std::min(w.rows, r0 + part.per_task);
        float *y = part.out->y;
        kernels::matmat_rows(w.type, w.cols, w.data, w.row_bytes, job.act, job.act_row, job.n_tokens, y,
                             part.out->y_stride, r0, r1, job.exact);
        if (const float *bias = part.out->bias) {
            for (int32_t t = 0; t < job.n_tokens; ++t) {
                float *yt = y + size_t(t) * part.out->y_stride;
                for (int64_t r = r0; r < r1; ++r) yt[r] += bias[r];
            }
        }
    };
    pool_.parallel_for(n_tasks, body);
}

void Linear::run(const MatrixView &w, const float *x, size_t x_stride, int32_t n_tokens, float *y,
                 size_t y_stride, const float *bias) {
    prepare(w.type, w.cols, x, x_stride, n_tokens);
    multiply(w, y, y_stride, bias);
}

}  // namespace moe
