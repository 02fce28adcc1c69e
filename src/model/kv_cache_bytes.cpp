// Raw byte views of the KV cache, for saving and restoring state.
#include "model/kv_cache.hpp"

namespace moe {

namespace {
template <typename T>
std::span<uint8_t> rows(std::vector<T> &store, int32_t layer, int32_t n_ctx, int32_t dim, int32_t n_pos) {
    const size_t first = size_t(layer) * size_t(n_ctx) * size_t(dim);
    return {reinterpret_cast<uint8_t *>(store.data() + first), size_t(n_pos) * size_t(dim) * sizeof(T)};
}
}  // namespace

std::span<uint8_t> KvCache::k_bytes(int32_t layer, int32_t n_pos) {
    return f32_ ? rows(k32_, layer, n_ctx_, k_dim_, n_pos) : rows(k16_, layer, n_ctx_, k_dim_, n_pos);
}

std::span<uint8_t> KvCache::v_bytes(int32_t layer, int32_t n_pos) {
    return f32_ ? rows(v32_, layer, n_ctx_, v_dim_, n_pos) : rows(v16_, layer, n_ctx_, v_dim_, n_pos);
}

std::span<const uint8_t> KvCache::k_bytes(int32_t layer, int32_t n_pos) const {
    return const_cast<KvCache *>(this)->k_bytes(layer, n_pos);
}

std::span<const uint8_t> KvCache::v_bytes(int32_t layer, int32_t n_pos) const {
    return const_cast<KvCache *>(this)->v_bytes(layer, n_pos);
}

}  // namespace moe
