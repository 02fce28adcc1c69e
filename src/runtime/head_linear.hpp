// Per-head slices of one matrix, each applied to its own head's input: head
// h's rows [h * rows, (h + 1) * rows) of w times head h's slice of the token.
// Latent attention does this twice a layer over every head (absorption
// through attn_k_b, decompression through attn_v_b). Through Linear::run per
// head it cost a conversion and a thread hand-off per head, about 15,600 a
// token on DeepSeek-V3 (128 heads, 61 layers); here every head's input is
// converted first and one parallel_for covers all (head, row chunk) tasks.
// Each output element comes from the same kernel call on the same converted
// row as per head, so results equal the per-head form exactly.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/thread_pool.hpp"
#include "model/weights.hpp"

namespace moe {

struct HeadSlices {
    const MatrixView *w = nullptr;  // n_head * rows rows of w->cols columns
    int32_t n_head = 0;
    int64_t rows = 0;               // per head
    // Head h of token t: w->cols inputs at x + t * x_token + h * x_head.
    const float *x = nullptr;
    size_t x_head = 0, x_token = 0;
    // Output row r of head h for token t: y[t * y_token + h * y_head + r].
    float *y = nullptr;
    size_t y_head = 0, y_token = 0;
};

// Bytes multiply_heads needs in `act` for n_tokens tokens.
size_t head_act_bytes(const MatrixView &w, int32_t n_head, int32_t n_tokens, bool exact);

void multiply_heads(ThreadPool &pool, bool exact, const HeadSlices &s, int32_t n_tokens, uint8_t *act,
                    size_t act_capacity);

}  // namespace moe
