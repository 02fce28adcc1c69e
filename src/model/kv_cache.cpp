#include "model/kv_cache.hpp"

#include "kernels/kernels.hpp"

namespace moe {

KvCache::KvCache(int32_t n_layer, int32_t n_ctx, int32_t k_dim, int32_t v_dim, bool f32)
    : n_layer_(n_layer), n_ctx_(n_ctx), k_dim_(k_dim), v_dim_(v_dim), f32_(f32) {
    const size_t nk = size_t(n_layer) * size_t(n_ctx) * size_t(k_dim);
    const size_t nv = size_t(n_layer) * size_t(n_ctx) * size_t(v_dim);
    if (f32) {
        k32_.assign(nk, 0.0f);
        v32_.assign(nv, 0.0f);
    } else {
        k16_.assign(nk, 0);
        v16_.assign(nv, 0);
    }
}

void KvCache::store(int32_t layer, int32_t pos, const float *k, const float *v) {
    const size_t ik = index(layer, pos, k_dim_), iv = index(layer, pos, v_dim_);
    if (f32_) {
        for (int32_t i = 0; i < k_dim_; ++i) k32_[ik + size_t(i)] = k[i];
        for (int32_t i = 0; i < v_dim_; ++i) v32_[iv + size_t(i)] = v[i];
    } else {
        kernels::f32_to_fp16_row(k, &k16_[ik], k_dim_);
        if (v_dim_ > 0) kernels::f32_to_fp16_row(v, &v16_[iv], v_dim_);
    }
}

void KvCache::load_k(int32_t layer, int32_t pos, int32_t offset, int32_t n, float *out) const {
    const size_t base = index(layer, pos, k_dim_) + size_t(offset);
    for (int32_t i = 0; i < n; ++i)
        out[i] = f32_ ? k32_[base + size_t(i)] : kernels::fp16_to_f32(k16_[base + size_t(i)]);
}

void KvCache::load_v(int32_t layer, int32_t pos, int32_t offset, int32_t n, float *out) const {
    if (values_in_keys()) return load_k(layer, pos, offset, n, out);
    const size_t base = index(layer, pos, v_dim_) + size_t(offset);
    for (int32_t i = 0; i < n; ++i)
        out[i] = f32_ ? v32_[base + size_t(i)] : kernels::fp16_to_f32(v16_[base + size_t(i)]);
}

float KvCache::dot_k(int32_t layer, int32_t pos, int32_t offset, int32_t n, const float *q) const {
    const size_t base = index(layer, pos, k_dim_) + size_t(offset);
    float sum = 0.0f;
    if (f32_) {
        const float *k = &k32_[base];
        for (int32_t i = 0; i < n; ++i) sum += q[i] * k[i];
    } else {
        const uint16_t *k = &k16_[base];
        for (int32_t i = 0; i < n; ++i) sum += q[i] * kernels::fp16_to_f32(k[i]);
    }
    return sum;
}

void KvCache::axpy_v(int32_t layer, int32_t pos, int32_t offset, int32_t n, float a, float *out) const {
    const bool in_k = values_in_keys();
    const size_t base = index(layer, pos, in_k ? k_dim_ : v_dim_) + size_t(offset);
    if (f32_) {
        const float *v = in_k ? &k32_[base] : &v32_[base];
        for (int32_t i = 0; i < n; ++i) out[i] += a * v[i];
    } else {
        const uint16_t *v = in_k ? &k16_[base] : &v16_[base];
        for (int32_t i = 0; i < n; ++i) out[i] += a * kernels::fp16_to_f32(v[i]);
    }
}

}  // namespace moe
