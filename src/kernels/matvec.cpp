// Public entry points: argument checks, exact mode, and the generic row and
// token loops used when an ISA has no specialised matvec/matmat.
#include <new>

#include "common/error.hpp"
#include "kernels/dispatch.hpp"

namespace moe::kernels {
namespace {

const detail::TypeKernels &kernels_for(GgmlType weight) {
    const uint32_t id = static_cast<uint32_t>(weight);
    if (id < kMaxGgmlTypeId) {
        const detail::TypeKernels &k = detail::kernel_table(active_isa()).type[id];
        if (k.dot) return k;
    }
    const TypeTraits &tr = type_traits(weight);
    fail(Status::unsupported, "no compute kernels for weight type %s (id %u)", tr.name ? tr.name : "unknown",
         static_cast<unsigned>(id));
}

void check_n(GgmlType weight, int64_t n) {
    const TypeTraits &tr = type_traits(weight);
    if (tr.block_elems == 0 || n < 0 || n % tr.block_elems != 0)
        fail(Status::invalid_argument, "row of %lld elements is not a multiple of the %s block size %u",
             static_cast<long long>(n), tr.name ? tr.name : "unknown", tr.block_elems);
}

}  // namespace

void dequantize_row(GgmlType type, const void *src, float *dst, int64_t n) {
    detail::dequantize_scalar(type, src, dst, n);
}

float dot(GgmlType weight, int64_t n, const void *w_row, const void *act, bool exact) {
    check_n(weight, n);
    if (exact) {
        (void)kernels_for(weight);  // rejects unsupported types
        return detail::dot_exact(weight, n, w_row, static_cast<const float *>(act));
    }
    return kernels_for(weight).dot(n, w_row, act);
}

void matvec_rows(GgmlType weight, int64_t n, const uint8_t *w, size_t row_bytes, const void *act, float *y,
                 int64_t r0, int64_t r1, bool exact) {
    check_n(weight, n);
    const detail::TypeKernels &k = kernels_for(weight);
    if (exact) {
        for (int64_t r = r0; r < r1; ++r)
            y[r - r0] = detail::dot_exact(weight, n, w + r * row_bytes, static_cast<const float *>(act));
        return;
    }
    if (k.matvec) return k.matvec(n, w, row_bytes, act, y, r0, r1);
    for (int64_t r = r0; r < r1; ++r) y[r - r0] = k.dot(n, w + r * row_bytes, act);
}

void matmat_rows(GgmlType weight, int64_t n, const uint8_t *w, size_t row_bytes, const void *act,
                 size_t act_stride, int32_t n_tokens, float *y, size_t y_stride, int64_t r0, int64_t r1,
                 bool exact) {
    check_n(weight, n);
    const detail::TypeKernels &k = kernels_for(weight);
    const uint8_t *a = static_cast<const uint8_t *>(act);
    if (exact) {
        for (int64_t r = r0; r < r1; ++r)
            for (int32_t t = 0; t < n_tokens; ++t)
                y[t * y_stride + r] = detail::dot_exact(weight, n, w + r * row_bytes,
                                                        reinterpret_cast<const float *>(a + t * act_stride));
        return;
    }
    if (k.matmat) return k.matmat(n, w, row_bytes, act, act_stride, n_tokens, y, y_stride, r0, r1);
    // The row stays in L1 while every token is dotted against it.
    for (int64_t r = r0; r < r1; ++r)
        for (int32_t t = 0; t < n_tokens; ++t) y[t * y_stride + r] = k.dot(n, w + r * row_bytes, a + t * act_stride);
}

size_t matmat_scratch_bytes(GgmlType weight, int64_t n, int32_t n_tokens, bool exact) {
    check_n(weight, n);
    const detail::TypeKernels &k = kernels_for(weight);
    return exact || !k.scratch_bytes ? 0 : k.scratch_bytes(n, n_tokens);
}

void reserve_scratch(size_t bytes) {
    if (bytes > 0) detail::kernel_scratch(bytes);
}

namespace detail {

void *kernel_scratch(size_t bytes) {
    struct Scratch {
        void *data = nullptr;
        size_t size = 0;
        ~Scratch() { ::operator delete(data, std::align_val_t{64}); }
    };
    thread_local Scratch s;
    if (bytes > s.size) {
        ::operator delete(s.data, std::align_val_t{64});
        s.data = nullptr;
        s.size = 0;
        const size_t grown = bytes < 4096 ? 4096 : bytes + bytes / 2;
        s.data = ::operator new(grown, std::align_val_t{64});
        s.size = grown;
    }
    return s.data;
}

}  // namespace detail
}  // namespace moe::kernels
