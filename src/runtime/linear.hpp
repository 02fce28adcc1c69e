// y = W x for a batch of token rows, parallel over output rows. Activations
// are converted once per (weight type, input) into a preallocated buffer;
// callers reuse them for several matrices of the same type and width
// (gate/up, q/k/v) through prepare/multiply. Each output row is computed by one task, so results do not depend
// on the number of threads or tokens.
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/weights.hpp"
#include "runtime/thread_pool.hpp"

namespace moe {

class Linear {
public:
    // act: buffer of act_capacity bytes for the converted activations.
    Linear(ThreadPool &pool, bool exact, uint8_t *act, size_t act_capacity);

    // Converts n_tokens rows of x (row t at x + t * x_stride) for weights of `type` with `cols` inputs.
    void prepare(GgmlType type, int64_t cols, const float *x, size_t x_stride, int32_t n_tokens);
    // y[t * y_stride + r] = row r of w . x_t (+ bias[r]) using the prepared activations.
    void multiply(const MatrixView &w, float *y, size_t y_stride, const float *bias = nullptr);
    // prepare + multiply.
    void run(const MatrixView &w, const float *x, size_t x_stride, int32_t n_tokens, float *y, size_t y_stride,
             const float *bias = nullptr);
    // True when the prepared activations can serve a matrix of this type and width.
    bool prepared_for(const MatrixView &w) const {
        return prepared_x_ && w.type == prepared_type_ && w.cols == prepared_cols_;
    }

    bool exact() const { return exact_; }
    ThreadPool &pool() { return pool_; }

private:
    ThreadPool &pool_;
    bool exact_;
    uint8_t *act_;
    size_t act_capacity_;
    // What the act buffer currently holds.
    GgmlType prepared_type_ = GgmlType::F32;
    int64_t prepared_cols_ = 0;
    const float *prepared_x_ = nullptr;
    int32_t prepared_tokens_ = 0;
    size_t act_row_ = 0;
};

}  // namespace moe
