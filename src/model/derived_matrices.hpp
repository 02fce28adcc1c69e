// Matrices built at open from the file's tensors instead of mapped from it:
// deepseek2's attn_kv_b, in files converted before absorbed latent
// attention, split into the per-head attn_k_b / attn_v_b (kv_b_split.hpp).
// ModelWeights' views point into one buffer held here; the model keeps it,
// so it lives as long as the model. They are dense weights the model owns:
// they count in its resident bytes, and they are neither copied out of the
// file mapping nor relocated with the mapped matrices.
//
// The buffer is of the kind the dense weights' copy lives in (a NumaBuffer,
// placed by the context's NUMA placement, huge pages where the kernel gives
// them), for the same reasons (runtime/dense_copy.hpp): every token reads all
// of it. For DeepSeek-V3's shapes it is over 2 GiB, so it is built in two
// steps: binding declares each matrix with how to fill it (independent tasks,
// e.g. one per attention head), and build() allocates the buffer once and
// runs every task on a thread pool. Each element is written by one task from
// the file's bytes alone, so the result does not depend on the threads.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "common/numa_memory.hpp"
#include "model/weights.hpp"

namespace moe {

class ThreadPool;

class DerivedMatrices {
public:
    // How a matrix is filled: task(t, data) for every t in [0, tasks) writes
    // its share of the matrix at `data` (zeroed before). Tasks run in any
    // order, possibly at once, and must write disjoint bytes.
    struct Fill {
        int64_t tasks = 0;
        std::function<void(int64_t task, uint8_t *data)> task;
    };

    // Whether matrices get memory (false: only their bytes are counted, for
    // a binding that checks the file without reading tensor data).
    explicit DerivedMatrices(bool allocate = true) : allocate_(allocate) {}

    // Declares a matrix of `rows` rows of `cols` elements of `type`: sets
    // `target`'s shape now and, in build(), its data. `target` must stay at
    // its address until then (the model's layer weights are sized before
    // any layer is bound).
    void add(MatrixView &target, GgmlType type, int64_t cols, int64_t rows, Fill fill);

    // Allocates one buffer for every matrix declared (placed by `placement`),
    // points their views into it and fills them: on `pool` (every task of
    // every matrix in one parallel_for), or on the calling thread when null.
    // Does nothing when not allocating. Throws out_of_memory when the memory
    // cannot be had.
    void build(NumaPlacement placement, ThreadPool *pool);

    // Whether `p` points into one of the matrices.
    bool holds(const uint8_t *p) const;
    uint64_t bytes() const { return bytes_; }  // of the matrices, without the alignment between them

private:
    struct Pending {
        MatrixView *target = nullptr;
        size_t offset = 0;  // in the buffer
        Fill fill;
    };
    bool allocate_ = true;
    std::vector<Pending> pending_;  // until build()
    size_t size_ = 0;               // of the buffer, with the alignment between matrices
    NumaBuffer memory_;
    uint64_t bytes_ = 0;
};

}  // namespace moe
