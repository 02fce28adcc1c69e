#include "runtime/head_linear.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "kernels/kernels.hpp"
#include "runtime/linear.hpp"

namespace moe {
namespace {
// Inputs converted per task: a few microseconds of work, so that a decode
// step's conversion (one token, every head) is split only when it outweighs
// the hand-off.
constexpr int64_t kConvertElems = 8192;
}  // namespace

size_t head_act_bytes(const MatrixView &w, int32_t n_head, int32_t n_tokens, bool exact) {
    return kernels::act_row_bytes(w.type, w.cols, exact) * size_t(n_head) * size_t(n_tokens);
}

void multiply_heads(ThreadPool &pool, bool exact, const HeadSlices &s, int32_t n_tokens, uint8_t *act,
                    size_t act_capacity) {
    const MatrixView &w = *s.w;
    if (w.cols % type_traits(w.type).block_elems != 0 || w.rows != int64_t(s.n_head) * s.rows)
        fail(Status::internal, "head slices: a %s matrix of %lld x %lld for %d heads of %lld rows",
             type_traits(w.type).name, static_cast<long long>(w.rows), static_cast<long long>(w.cols), s.n_head,
             static_cast<long long>(s.rows));
    const size_t row = kernels::act_row_bytes(w.type, w.cols, exact);
    if (head_act_bytes(w, s.n_head, n_tokens, exact) > act_capacity)
        fail(Status::internal, "head slices: activation buffer of %zu bytes too small for %d tokens of %d heads",
             act_capacity, n_tokens, s.n_head);

    // Converted row of (token t, head h) at act + (t * n_head + h) * row.
    const int64_t n_rows = int64_t(n_tokens) * s.n_head;
    const int64_t per_convert = std::max<int64_t>(1, kConvertElems / std::max<int64_t>(1, w.cols));
    const int64_t convert_tasks = (n_rows + per_convert - 1) / per_convert;
    auto convert = [&s, &w, act, row, n_rows, per_convert, exact](int64_t task, int32_t) {
        const int64_t i1 = std::min(n_rows, (task + 1) * per_convert);
        for (int64_t i = task * per_convert; i < i1; ++i) {
            const size_t t = size_t(i / s.n_head), h = size_t(i % s.n_head);
            kernels::quantize_act(w.type, s.x + t * s.x_token + h * s.x_head, act + size_t(i) * row, w.cols, exact);
        }
    };
    if (convert_tasks == 1) convert(0, 0);
    else pool.parallel_for(convert_tasks, convert);

    const int64_t per = std::min<int64_t>(
        s.rows, rows_per_task(w.rows, w.row_bytes * size_t(n_tokens), pool.size()));
    const int64_t chunks = (s.rows + per - 1) / per;
    const size_t act_stride = row * size_t(s.n_head);
    pool.parallel_for(int64_t(s.n_head) * chunks, [&s, &w, act, row, act_stride, per, chunks, n_tokens,
                                                   exact](int64_t task, int32_t) {
        const int64_t h = task / chunks;
        const int64_t r0 = (task % chunks) * per, r1 = std::min(s.rows, r0 + per);
        kernels::matmat_rows(w.type, w.cols, w.row(h * s.rows), w.row_bytes, act + size_t(h) * row, act_stride,
                             n_tokens, s.y + size_t(h) * s.y_head, s.y_token, r0, r1, exact);
    });
}

}  // namespace moe
