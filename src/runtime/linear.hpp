// y = W x for a batch of token rows, parallel over output rows. Activations
// are converted once per (activation format, input) into a preallocated
// buffer; callers reuse them for several matrices whose weight types take the
// same activation format and width (gate/up, q/k/v) through prepare/multiply,
// and multiply_group runs several such matrices in one parallel_for. Each
// output row is computed by one kernel call over whole rows, so results do not
// depend on the number of threads, tasks or tokens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "common/thread_pool.hpp"
#include "model/weights.hpp"

namespace moe {

// One matrix of a multiply_group call: y[t * y_stride + r] = row r of w . x_t (+ bias[r]).
struct LinearOutput {
    const MatrixView *w = nullptr;
    float *y = nullptr;
    size_t y_stride = 0;
    const float *bias = nullptr;
};

// Rows per task for a matrix of `rows` rows of `row_bytes` bytes split over
// `workers` threads: tasks of about kTaskBytes of weights (so the dynamic
// hand-out balances the threads to within one small task), at least
// kMinRowsPerTask rows, and at least four tasks per worker when there are rows
// enough.
int64_t rows_per_task(int64_t rows, size_t row_bytes, int32_t workers);

class Linear {
public:
    // act: buffer of act_capacity bytes for the converted activations.
    Linear(ThreadPool &pool, bool exact, uint8_t *act, size_t act_capacity);

    // Converts n_tokens rows of x (row t at x + t * x_stride) for weights of `type` with `cols` inputs.
    void prepare(GgmlType type, int64_t cols, const float *x, size_t x_stride, int32_t n_tokens);
    // y[t * y_stride + r] = row r of w . x_t (+ bias[r]) using the prepared activations.
    void multiply(const MatrixView &w, float *y, size_t y_stride, const float *bias = nullptr);
    // multiply for several matrices (all prepared_for) in one parallel_for.
    void multiply_group(std::span<const LinearOutput> outputs);
    // prepare + multiply.
    void run(const MatrixView &w, const float *x, size_t x_stride, int32_t n_tokens, float *y, size_t y_stride,
             const float *bias = nullptr);
    // True when the prepared activations can serve a matrix of this type and
    // width (the weight types share an activation format).
    bool prepared_for(const MatrixView &w) const;

    bool exact() const { return exact_; }
    ThreadPool &pool() { return pool_; }

private:
    ThreadPool &pool_;
    bool exact_;
    uint8_t *act_;
    size_t act_capacity_;
    // What the act buffer currently holds.
    GgmlType prepared_act_type_ = GgmlType::F32;
    int64_t prepared_cols_ = 0;
    const float *prepared_x_ = nullptr;
    int32_t prepared_tokens_ = 0;
    size_t act_row_ = 0;
};

}  // namespace moe
