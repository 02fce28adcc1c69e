#include "model/derived_matrices.hpp"

#include <cstring>
#include <functional>
#include <new>

#include "common/error.hpp"

namespace moe {
namespace {
// The kernels' vector loads do not need it, but a cache line per row start
// costs nothing here and matches what a file mapping gives wide rows.
constexpr std::align_val_t kAlignment{64};
}  // namespace

void DerivedMatrices::AlignedFree::operator()(uint8_t *p) const { ::operator delete(p, kAlignment); }

MatrixView DerivedMatrices::add(GgmlType type, int64_t cols, int64_t rows, uint8_t **writable) {
    MatrixView m;
    m.type = type;
    m.cols = cols;
    m.rows = rows;
    m.row_bytes = size_t(row_bytes(type, uint64_t(cols)));
    const size_t size = m.row_bytes * size_t(rows);
    bytes_ += size;
    *writable = nullptr;
    if (!allocate_) return m;
    void *p = ::operator new(size, kAlignment, std::nothrow);
    if (!p) fail(Status::out_of_memory, "cannot allocate %zu bytes for a matrix built at open", size);
    std::memset(p, 0, size);
    buffers_.push_back(Buffer{std::unique_ptr<uint8_t, AlignedFree>(static_cast<uint8_t *>(p)), size});
    m.data = buffers_.back().data.get();
    *writable = buffers_.back().data.get();
    return m;
}

bool DerivedMatrices::holds(const uint8_t *p) const {
    const std::less<const uint8_t *> before;
    for (const Buffer &b : buffers_)
        if (!before(p, b.data.get()) && before(p, b.data.get() + b.size)) return true;
    return false;
}

}  // namespace moe
