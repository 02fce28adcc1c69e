// How many rows each layer's KV cache holds: every position for full
// attention, a ring for a sliding window.
#include <algorithm>

#include "common/saturating.hpp"
#include "model/hparams.hpp"
#include "model/kv_cache.hpp"

namespace moe {

KvLayout KvLayout::full(int32_t n_layer, int32_t n_ctx, int32_t k_dim, int32_t v_dim) {
    KvLayout out;
    out.n_ctx = n_ctx;
    out.k_dim = k_dim;
    out.v_dim = v_dim;
    out.window.assign(size_t(std::max(n_layer, 0)), 0);
    out.rows.assign(size_t(std::max(n_layer, 0)), n_ctx);
    return out;
}

// Saturating: the budget estimate asks about any context length a caller passes.
uint64_t KvLayout::bytes(size_t element_bytes) const {
    uint64_t rows_total = 0;
    for (int32_t l = 0; l < n_layer(); ++l) rows_total += uint64_t(rows[size_t(l)]) + uint64_t(kept_rows(l));
    return sat_mul(sat_mul(rows_total, uint64_t(k_dim) + uint64_t(v_dim)), element_bytes);
}

KvLayout kv_layout_for(const HParams &hp, int32_t n_ctx, int32_t max_batch) {
    // Latent attention caches keys only: the value is the key's latent part.
    KvLayout out = KvLayout::full(hp.n_layer, n_ctx, hp.n_head_kv * hp.head_dim_k,
                                  hp.latent_attention() ? 0 : hp.n_head_kv * hp.head_dim_v);
    for (int32_t l = 0; l < hp.n_layer; ++l) {
        if (!hp.is_swa(l)) continue;
        out.window[size_t(l)] = hp.n_swa;
        // A step of T tokens at positions p .. p + T - 1 stores all T keys
        // before any of them attends, and its first token still reads the
        // n_swa - 1 positions before p: n_swa - 1 + T rows are needed at
        // once. Steps of at most max_batch tokens therefore never overwrite a
        // row still read with a ring of n_swa + max_batch - 1 rows; more than
        // n_ctx rows would never be used.
        out.rows[size_t(l)] = int32_t(std::min<int64_t>(n_ctx, int64_t(hp.n_swa) + std::max(max_batch, 1) - 1));
    }
    return out;
}

}  // namespace moe
