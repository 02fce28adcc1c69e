#include "model/kv_b_split.hpp"

#include <cstring>
#include <vector>

#include "kernels/kernels.hpp"

namespace moe {

void bind_split_kv_b(TensorBinder &b, const HParams &hp, int32_t layer, LayerWeights &out) {
    const int64_t n_head = hp.n_head, kv_lora = hp.kv_lora_rank;
    const int64_t nope = hp.head_dim_k_mla - hp.n_rot, v_head = hp.head_dim_v_mla, per_head = nope + v_head;
    const MatrixView kv_b =
        b.source_matrix(TensorBinder::layer_name(layer, "attn_kv_b.weight"), kv_lora, n_head * per_head);
    const TypeTraits &tr = type_traits(kv_b.type);
    const bool float_type = tr.block_elems == 1;
    uint8_t *k = nullptr, *v = nullptr;
    out.wk_b = b.derived().add(float_type ? kv_b.type : GgmlType::F32, nope, n_head * kv_lora, &k);
    out.wv_b = b.derived().add(kv_b.type, kv_lora, n_head * v_head, &v);
    if (!k) return;  // checking the file only

    const size_t k_elem = float_type ? tr.block_bytes : sizeof(float);
    std::vector<float> row(float_type ? 0 : size_t(kv_lora));
    for (int64_t h = 0; h < n_head; ++h) {
        for (int64_t j = 0; j < v_head; ++j)
            std::memcpy(v + size_t(h * v_head + j) * out.wv_b.row_bytes, kv_b.row(h * per_head + nope + j),
                        kv_b.row_bytes);
        // Key row d of head h is column d of the head's kv_lora rows.
        for (int64_t d = 0; d < nope; ++d) {
            const uint8_t *src = kv_b.row(h * per_head + d);
            if (!float_type) {
                kernels::dequantize_row(kv_b.type, src, row.data(), kv_lora);
                src = reinterpret_cast<const uint8_t *>(row.data());
            }
            uint8_t *dst = k + size_t(h * kv_lora) * out.wk_b.row_bytes + size_t(d) * k_elem;
            for (int64_t c = 0; c < kv_lora; ++c)
                std::memcpy(dst + size_t(c) * out.wk_b.row_bytes, src + size_t(c) * k_elem, k_elem);
        }
    }
}

}  // namespace moe
