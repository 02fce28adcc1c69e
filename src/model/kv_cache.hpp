// Keys (after RoPE) and values of every layer, stored as f16 by default or
// f32 in exact mode. Allocated once, at construction.
//
// A full-attention layer keeps every position of the context. A
// sliding-window layer keeps only a ring of the last positions (KvLayout says
// how many): position p lives in row p % rows, and a step writing new
// positions overwrites the oldest ones, which no later query can see.
//
// A cache made with v_dim 0 keeps keys only and serves values from them:
// latent attention (MLA) caches one row per token whose leading elements are
// also the value. Value reads then address the key row (offset within it)
// and saved states hold no V sections.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace moe {

struct HParams;

// How many rows each layer's cache holds.
struct KvLayout {
    int32_t n_ctx = 0;
    int32_t k_dim = 0;
    int32_t v_dim = 0;            // 0: values live in the keys
    std::vector<int32_t> window;  // per layer: positions a query sees (its own included), 0 = all
    std::vector<int32_t> rows;    // per layer: rows kept, n_ctx or a ring of fewer

    int32_t n_layer() const { return int32_t(rows.size()); }
    // Whether layer l overwrites old positions (a window whose ring is shorter than the context).
    bool is_ring(int32_t l) const { return rows[size_t(l)] < n_ctx; }
    // Rows of the copy a step longer than one chunk keeps of a ring layer
    // (KvCache::keep_window): the window's positions before the step's first.
    int32_t kept_rows(int32_t l) const { return is_ring(l) ? window[size_t(l)] - 1 : 0; }
    // Bytes of the whole cache, the rings' copies included, at element_bytes per value.
    uint64_t bytes(size_t element_bytes) const;

    // Every layer keeps all n_ctx positions.
    static KvLayout full(int32_t n_layer, int32_t n_ctx, int32_t k_dim, int32_t v_dim);
};

// The cache of a model for contexts of n_ctx positions run in steps of at
// most max_batch tokens (kv_layout.cpp): rings for its sliding-window layers.
KvLayout kv_layout_for(const HParams &hp, int32_t n_ctx, int32_t max_batch);

// Rows of consecutive positions of one layer, in position order: row i of
// the run lies in cache row `start + i`, less `count` once that reaches
// `count` (a run wraps around a ring at most once).
struct KvRowRun {
    const uint8_t *base = nullptr;  // cache row 0
    size_t row_bytes = 0;
    int32_t start = 0, count = 0;

    const uint8_t *row(int32_t i) const {
        int32_t r = start + i;
        if (r >= count) r -= count;
        return base + size_t(r) * row_bytes;
    }
};

enum class KvPart { k, v };

class KvCache {
public:
    KvCache(const KvLayout &layout, bool f32);
    // Every layer full.
    KvCache(int32_t n_layer, int32_t n_ctx, int32_t k_dim, int32_t v_dim, bool f32)
        : KvCache(KvLayout::full(n_layer, n_ctx, k_dim, v_dim), f32) {}

    // v is ignored (may be null) when values live in the keys.
    void store(int32_t layer, int32_t pos, const float *k, const float *v);
    // Key / value of one head at one position, widened to f32 into out.
    void load_k(int32_t layer, int32_t pos, int32_t offset, int32_t n, float *out) const;
    void load_v(int32_t layer, int32_t pos, int32_t offset, int32_t n, float *out) const;
    // Dot product of q (n values) with the key at (layer, pos, offset).
    float dot_k(int32_t layer, int32_t pos, int32_t offset, int32_t n, const float *q) const;
    // out[i] += a * value[offset + i]
    void axpy_v(int32_t layer, int32_t pos, int32_t offset, int32_t n, float a, float *out) const;
    // The key (or value) rows of positions first, first + 1, ... of a layer,
    // as long as they are kept (the value run is the key run where values live in the keys).
    KvRowRun run(KvPart part, int32_t layer, int32_t first) const;

    bool is_f32() const { return f32_; }
    // Bytes of one cached value: a float in exact mode, else a half.
    static constexpr size_t element_bytes_of(bool f32) { return f32 ? sizeof(float) : sizeof(uint16_t); }
    size_t element_bytes() const { return element_bytes_of(f32_); }
    int32_t k_dim() const { return layout_.k_dim; }
    int32_t v_dim() const { return layout_.v_dim; }  // 0 when values live in the keys
    bool values_in_keys() const { return layout_.v_dim == 0; }
    const KvLayout &layout() const { return layout_; }
    int32_t n_ctx() const { return layout_.n_ctx; }
    // Everything allocated: the rows and the rings' copies.
    size_t bytes() const {
        return (f32_ ? (k32_.size() + v32_.size()) * 4 : (k16_.size() + v16_.size()) * 2) + kept_.size();
    }

    // The first position a step that starts at n_past can read in this layer
    // (0 for full attention): a state at n_past needs the layer's rows from
    // there on, and a ring still holds them (kv_cache_rows.cpp).
    int32_t first_needed(int32_t layer, int32_t n_past) const;
    // The fewest positions a context at n_past can go back to and continue
    // exactly: 0 without rings; with them, the point from which every ring
    // still holds the window of the position that comes next (a ring keeps its
    // last `rows` positions, so rings that have wrapped allow going back by
    // rows - window + 1 positions, max_batch as kv_layout_for sizes them).
    int32_t min_keep(int32_t n_past) const;
    // Positions [first, end) of one layer as raw cache elements, position
    // after position: one span, or two where the ring wraps. Every position
    // must still be kept (first >= end - rows). For saving state.
    std::array<std::span<const uint8_t>, 2> row_bytes(KvPart part, int32_t layer, int32_t first, int32_t end) const;
    // Writes `bytes` (whole rows, position after position) as the rows of
    // positions first, first + 1, ...; for restoring state.
    void write_rows(KvPart part, int32_t layer, int32_t first, std::span<const uint8_t> bytes);

    // A step of more tokens than one chunk wraps its later chunks around each
    // ring onto the rows its first positions read, so a step that fails
    // would leave the rings without the rows before it. keep_window copies
    // the rows [first_needed, n_past) of every ring aside before such a step;
    // restore_window puts them back after it failed.
    void keep_window(int32_t n_past);
    void restore_window(int32_t n_past);

private:
    size_t row_index(int32_t layer, int32_t pos) const {
        const int32_t rows = layout_.rows[size_t(layer)];
        return row0_[size_t(layer)] + size_t(rows == layout_.n_ctx ? pos : pos % rows);
    }
    // Whether a part's rows are key rows: the keys', and the values' where values live in the keys.
    bool in_keys(KvPart part) const { return part == KvPart::k || values_in_keys(); }
    // Cache row 0 of a part as raw elements, and the bytes of one row.
    const uint8_t *base(KvPart part) const;
    size_t row_size(KvPart part) const;
    // f(elements) with the elements of a part's row at (layer, pos) from
    // `offset` on, as the cache holds them: floats in exact mode, else halves.
    template <class F>
    void with_row(KvPart part, int32_t layer, int32_t pos, int32_t offset, F &&f) const;

    KvLayout layout_;
    bool f32_;
    std::vector<size_t> row0_;  // per layer: its first row
    // Rows of k_dim / v_dim elements: halves, or floats in exact mode.
    std::vector<uint16_t> k16_, v16_;
    std::vector<float> k32_, v32_;
    // keep_window's copies: per ring layer, its K rows then its V rows.
    std::vector<uint8_t> kept_;
};

}  // namespace moe
