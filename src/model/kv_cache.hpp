// Keys (after RoPE) and values of every layer and position, stored as f16 by
// default or f32 in exact mode. Allocated once for n_ctx positions.
//
// A cache made with v_dim 0 keeps keys only and serves values from them:
// latent attention (MLA) caches one row per token whose leading elements are
// also the value. Value reads then address the key row (offset within it),
// v_bytes is empty and saved states hold no V sections.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace moe {

class KvCache {
public:
    KvCache(int32_t n_layer, int32_t n_ctx, int32_t k_dim, int32_t v_dim, bool f32);

    // v is ignored (may be null) when values live in the keys.
    void store(int32_t layer, int32_t pos, const float *k, const float *v);
    // Key / value of one head at one position, widened to f32 into out.
    void load_k(int32_t layer, int32_t pos, int32_t offset, int32_t n, float *out) const;
    void load_v(int32_t layer, int32_t pos, int32_t offset, int32_t n, float *out) const;
    // Dot product of q (n values) with the key at (layer, pos, offset).
    float dot_k(int32_t layer, int32_t pos, int32_t offset, int32_t n, const float *q) const;
    // out[i] += a * value[offset + i]
    void axpy_v(int32_t layer, int32_t pos, int32_t offset, int32_t n, float a, float *out) const;

    bool is_f32() const { return f32_; }
    size_t element_bytes() const { return f32_ ? 4 : 2; }
    int32_t k_dim() const { return k_dim_; }
    int32_t v_dim() const { return v_dim_; }  // 0 when values live in the keys
    bool values_in_keys() const { return v_dim_ == 0; }
    // Positions [0, n_pos) of one layer's keys / values as raw cache elements,
    // position after position (kv_cache_bytes.cpp; for saving and restoring state).
    std::span<uint8_t> k_bytes(int32_t layer, int32_t n_pos);
    std::span<uint8_t> v_bytes(int32_t layer, int32_t n_pos);
    std::span<const uint8_t> k_bytes(int32_t layer, int32_t n_pos) const;
    std::span<const uint8_t> v_bytes(int32_t layer, int32_t n_pos) const;
    size_t bytes() const { return f32_ ? (k32_.size() + v32_.size()) * 4 : (k16_.size() + v16_.size()) * 2; }
    int32_t n_ctx() const { return n_ctx_; }

private:
    size_t index(int32_t layer, int32_t pos, int32_t dim) const {
        return (size_t(layer) * size_t(n_ctx_) + size_t(pos)) * size_t(dim);
    }
    int32_t n_layer_, n_ctx_, k_dim_, v_dim_;
    bool f32_;
    std::vector<uint16_t> k16_, v16_;
    std::vector<float> k32_, v32_;
};

}  // namespace moe
