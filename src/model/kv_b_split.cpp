#include "model/kv_b_split.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/kernels.hpp"

namespace moe {
namespace {

// Key rows transposed a block at a time: a cache line of F32 columns.
constexpr int64_t kKeyRowBlock = 16;

// rows[i] (i < n), each `cols` elements of `Elem` bytes, become columns i of
// the rows at dst + c * stride (c < cols). Row c's n elements are written
// together, so each destination line is written whole rather than one
// element at a time with a line's worth of rows in between, which thrashed
// the cache (the rows lie a power of two apart). `Elem` is a constant, so
// each copy is one load and one store.
template <size_t Elem>
void write_as_columns(const uint8_t *const *rows, int64_t n, int64_t cols, uint8_t *dst, size_t stride) {
    for (int64_t c = 0; c < cols; ++c) {
        uint8_t *out = dst + size_t(c) * stride;
        for (int64_t i = 0; i < n; ++i) std::memcpy(out + size_t(i) * Elem, rows[i] + size_t(c) * Elem, Elem);
    }
}

}  // namespace

void bind_split_kv_b(TensorBinder &b, const HParams &hp, int32_t layer, LayerWeights &out) {
    const int64_t n_head = hp.n_head, kv_lora = hp.kv_lora_rank;
    const int64_t nope = hp.head_dim_k_mla - hp.n_rot, v_head = hp.head_dim_v_mla, per_head = nope + v_head;
    const MatrixView kv_b =
        b.source_matrix(TensorBinder::layer_name(layer, "attn_kv_b.weight"), kv_lora, n_head * per_head);
    const TypeTraits &tr = type_traits(kv_b.type);
    const bool float_type = tr.block_elems == 1;
    const GgmlType k_type = float_type ? kv_b.type : GgmlType::F32;
    const size_t k_elem = float_type ? tr.block_bytes : sizeof(float);
    const size_t k_row = size_t(row_bytes(k_type, uint64_t(nope)));
    // One task a head for each matrix.
    b.derived().add(out.wv_b, kv_b.type, kv_lora, n_head * v_head,
                    {n_head, [=](int64_t h, uint8_t *v) {
                         for (int64_t j = 0; j < v_head; ++j)
                             std::memcpy(v + size_t(h * v_head + j) * kv_b.row_bytes,
                                         kv_b.row(h * per_head + nope + j), kv_b.row_bytes);
                     }});
    b.derived().add(out.wk_b, k_type, nope, n_head * kv_lora,
                    {n_head, [=](int64_t h, uint8_t *k) {
                         std::vector<float> dequantised(float_type ? 0 : size_t(kKeyRowBlock * kv_lora));
                         const uint8_t *rows[kKeyRowBlock];
                         // Key row d of head h is column d of the head's kv_lora rows.
                         for (int64_t d0 = 0; d0 < nope; d0 += kKeyRowBlock) {
                             const int64_t n = std::min(kKeyRowBlock, nope - d0);
                             for (int64_t i = 0; i < n; ++i) {
                                 rows[i] = kv_b.row(h * per_head + d0 + i);
                                 if (float_type) continue;
                                 float *row = dequantised.data() + size_t(i * kv_lora);
                                 kernels::dequantize_row(kv_b.type, rows[i], row, kv_lora);
                                 rows[i] = reinterpret_cast<const uint8_t *>(row);
                             }
                             uint8_t *dst = k + size_t(h * kv_lora) * k_row + size_t(d0) * k_elem;
                             // F32 (or dequantised), else F16 / BF16: the float types weights may have.
                             if (k_elem == 4) write_as_columns<4>(rows, n, kv_lora, dst, k_row);
                             else write_as_columns<2>(rows, n, kv_lora, dst, k_row);
                         }
                     }});
}

}  // namespace moe
