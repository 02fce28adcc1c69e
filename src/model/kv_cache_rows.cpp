// Whole rows of the KV cache as raw bytes: saving and restoring state, and
// the copy of a ring's window that a failed step puts back.
#include <algorithm>
#include <cstring>

#include "model/kv_cache.hpp"

namespace moe {

int32_t KvCache::first_needed(int32_t layer, int32_t n_past) const {
    const int32_t window = layout_.window[size_t(layer)];
    // The token at n_past sees window - 1 positions before its own.
    return window > 0 ? std::max(0, n_past - (window - 1)) : 0;
}

int32_t KvCache::min_keep(int32_t n_past) const {
    int32_t keep = 0;
    for (int32_t l = 0; l < layout_.n_layer(); ++l) {
        const int32_t rows = layout_.rows[size_t(l)];
        // A ring that has not wrapped yet still holds every position.
        if (!layout_.is_ring(l) || n_past <= rows) continue;
        // Going back to k needs positions [k - (window - 1), k), and the ring
        // holds [n_past - rows, n_past).
        keep = std::max(keep, n_past - rows + layout_.window[size_t(l)] - 1);
    }
    return keep;
}

std::array<std::span<const uint8_t>, 2> KvCache::row_bytes(KvPart part, int32_t layer, int32_t first,
                                                           int32_t end) const {
    if (end <= first) return {};
    const KvRowRun r = run(part, layer, first);
    const int32_t n = end - first, before_wrap = std::min(n, r.count - r.start);
    return {std::span<const uint8_t>(r.row(0), size_t(before_wrap) * r.row_bytes),
            std::span<const uint8_t>(r.base, size_t(n - before_wrap) * r.row_bytes)};
}

void KvCache::write_rows(KvPart part, int32_t layer, int32_t first, std::span<const uint8_t> bytes) {
    const size_t size = row_size(part);
    const int32_t n = int32_t(bytes.size() / size);
    for (const std::span<const uint8_t> rows : row_bytes(part, layer, first, first + n)) {
        if (rows.empty()) continue;
        // The spans view this cache's own rows: writing through them is writing to *this.
        std::memcpy(const_cast<uint8_t *>(rows.data()), bytes.data(), rows.size());
        bytes = bytes.subspan(rows.size());
    }
}

void KvCache::keep_window(int32_t n_past) {
    uint8_t *out = kept_.data();
    for (int32_t l = 0; l < layout_.n_layer(); ++l) {
        if (!layout_.is_ring(l)) continue;
        for (const KvPart part : {KvPart::k, KvPart::v}) {
            if (part == KvPart::v && values_in_keys()) continue;
            for (const std::span<const uint8_t> rows : row_bytes(part, l, first_needed(l, n_past), n_past)) {
                if (!rows.empty()) std::memcpy(out, rows.data(), rows.size());
                out += rows.size();
            }
        }
    }
}

void KvCache::restore_window(int32_t n_past) {
    const uint8_t *in = kept_.data();
    for (int32_t l = 0; l < layout_.n_layer(); ++l) {
        if (!layout_.is_ring(l)) continue;
        const int32_t first = first_needed(l, n_past);
        for (const KvPart part : {KvPart::k, KvPart::v}) {
            if (part == KvPart::v && values_in_keys()) continue;
            const size_t n = size_t(n_past - first) * row_size(part);
            write_rows(part, l, first, {in, n});
            in += n;
        }
    }
}

}  // namespace moe
