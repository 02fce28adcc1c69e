#include "model/kv_cache.hpp"

#include "kernels/kernels.hpp"

namespace moe {

KvCache::KvCache(const KvLayout &layout, bool f32) : layout_(layout), f32_(f32) {
    size_t rows = 0, kept = 0;
    for (int32_t l = 0; l < layout.n_layer(); ++l) {
        row0_.push_back(rows);
        rows += size_t(layout.rows[size_t(l)]);
        kept += size_t(layout.kept_rows(l));
    }
    const size_t nk = rows * size_t(layout.k_dim), nv = rows * size_t(layout.v_dim);
    if (f32) {
        k32_.assign(nk, 0.0f);
        v32_.assign(nv, 0.0f);
    } else {
        k16_.assign(nk, 0);
        v16_.assign(nv, 0);
    }
    kept_.assign(kept * (row_size(KvPart::k) + (values_in_keys() ? 0 : row_size(KvPart::v))), 0);
}

void KvCache::store(int32_t layer, int32_t pos, const float *k, const float *v) {
    const size_t row = row_index(layer, pos);
    const size_t ik = row * size_t(k_dim()), iv = row * size_t(v_dim());
    if (f32_) {
        for (int32_t i = 0; i < k_dim(); ++i) k32_[ik + size_t(i)] = k[i];
        for (int32_t i = 0; i < v_dim(); ++i) v32_[iv + size_t(i)] = v[i];
    } else {
        kernels::f32_to_fp16_row(k, &k16_[ik], k_dim());
        if (v_dim() > 0) kernels::f32_to_fp16_row(v, &v16_[iv], v_dim());
    }
}

namespace {

// A cache element as f32.
float widen(float x) { return x; }
float widen(uint16_t h) { return kernels::fp16_to_f32(h); }

}  // namespace

template <class F>
void KvCache::with_row(KvPart part, int32_t layer, int32_t pos, int32_t offset, F &&f) const {
    const bool k = in_keys(part);
    const size_t i = row_index(layer, pos) * size_t(k ? k_dim() : v_dim()) + size_t(offset);
    if (f32_) f(&(k ? k32_ : v32_)[i]);
    else f(&(k ? k16_ : v16_)[i]);
}

void KvCache::load_k(int32_t layer, int32_t pos, int32_t offset, int32_t n, float *out) const {
    with_row(KvPart::k, layer, pos, offset, [&](const auto *k) {
        for (int32_t i = 0; i < n; ++i) out[i] = widen(k[i]);
    });
}

void KvCache::load_v(int32_t layer, int32_t pos, int32_t offset, int32_t n, float *out) const {
    with_row(KvPart::v, layer, pos, offset, [&](const auto *v) {
        for (int32_t i = 0; i < n; ++i) out[i] = widen(v[i]);
    });
}

float KvCache::dot_k(int32_t layer, int32_t pos, int32_t offset, int32_t n, const float *q) const {
    float sum = 0.0f;
    with_row(KvPart::k, layer, pos, offset, [&](const auto *k) {
        for (int32_t i = 0; i < n; ++i) sum += q[i] * widen(k[i]);
    });
    return sum;
}

void KvCache::axpy_v(int32_t layer, int32_t pos, int32_t offset, int32_t n, float a, float *out) const {
    with_row(KvPart::v, layer, pos, offset, [&](const auto *v) {
        for (int32_t i = 0; i < n; ++i) out[i] += a * widen(v[i]);
    });
}

const uint8_t *KvCache::base(KvPart part) const {
    const bool k = in_keys(part);
    if (f32_) return reinterpret_cast<const uint8_t *>(k ? k32_.data() : v32_.data());
    return reinterpret_cast<const uint8_t *>(k ? k16_.data() : v16_.data());
}

size_t KvCache::row_size(KvPart part) const {
    return size_t(in_keys(part) ? k_dim() : v_dim()) * element_bytes();
}

KvRowRun KvCache::run(KvPart part, int32_t layer, int32_t first) const {
    const size_t row = row_index(layer, first);
    const size_t size = row_size(part);
    const size_t row0 = row0_[size_t(layer)];
    return {base(part) + row0 * size, size, int32_t(row - row0), layout_.rows[size_t(layer)]};
}

}  // namespace moe
