#include "model/derived_matrices.hpp"

#include <algorithm>
#include <functional>
#include <utility>

#include "common/thread_pool.hpp"

namespace moe {
namespace {
// The kernels' vector loads do not need it, but a cache line per matrix start
// costs nothing here and matches what a file mapping gives wide rows.
constexpr size_t kAlignment = 64;
}  // namespace

void DerivedMatrices::add(MatrixView &target, GgmlType type, int64_t cols, int64_t rows, Fill fill) {
    target = MatrixView{};
    target.type = type;
    target.cols = cols;
    target.rows = rows;
    target.row_bytes = size_t(row_bytes(type, uint64_t(cols)));
    const size_t size = target.row_bytes * size_t(rows);
    bytes_ += size;
    if (!allocate_) return;
    size_ = (size_ + kAlignment - 1) / kAlignment * kAlignment;
    pending_.push_back(Pending{&target, size_, std::move(fill)});
    size_ += size;
}

void DerivedMatrices::build(NumaPlacement placement, ThreadPool *pool) {
    if (pending_.empty()) return;
    memory_ = NumaBuffer(size_, placement);
    uint8_t *base = static_cast<uint8_t *>(memory_.data());
    // first[i]: the index of matrix i's first task among all matrices' tasks.
    std::vector<int64_t> first;
    int64_t tasks = 0;
    for (Pending &p : pending_) {
        p.target->data = base + p.offset;
        first.push_back(tasks);
        tasks += p.fill.tasks;
    }
    auto run = [&](int64_t t, int32_t) {
        const size_t i = size_t(std::upper_bound(first.begin(), first.end(), t) - first.begin()) - 1;
        pending_[i].fill.task(t - first[i], base + pending_[i].offset);
    };
    if (pool) pool->parallel_for(tasks, run);
    else
        for (int64_t t = 0; t < tasks; ++t) run(t, 0);
    pending_.clear();
}

bool DerivedMatrices::holds(const uint8_t *p) const {
    const std::less<const uint8_t *> before;
    const uint8_t *base = static_cast<const uint8_t *>(memory_.data());
    return base && !before(p, base) && before(p, base + memory_.size());
}

}  // namespace moe
