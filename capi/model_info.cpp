#include "model_info.hpp"

#include <cstring>

#include "common/ggml_types.hpp"

namespace moe::capi {
namespace {

// Copies a string into a fixed char array, truncating and always terminating.
template <size_t N>
void copy_text(char (&dst)[N], const std::string &src) {
    const size_t n = src.size() < N - 1 ? src.size() : N - 1;
    std::memcpy(dst, src.data(), n);
    dst[n] = '\0';
}

}  // namespace

moestream_model_info make_model_info(const HParams &hp, const ModelBytes &bytes, uint64_t file_bytes,
                                     int32_t io_mode, const std::string &io_mode_reason) {
    moestream_model_info info;
    std::memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    copy_text(info.architecture, hp.arch);
    copy_text(info.name, hp.name);
    info.n_vocab = hp.n_vocab;
    info.n_ctx_train = hp.n_ctx_train;
    info.n_embd = hp.n_embd;
    info.n_layer = hp.n_layer;
    info.n_head = hp.n_head;
    info.n_head_kv = hp.n_head_kv;
    info.head_dim = hp.head_dim_k;
    info.n_expert = hp.n_expert;
    info.n_expert_used = hp.n_expert_used;
    info.n_ff_expert = hp.n_ff_expert;
    info.n_ff_shared = hp.n_ff_shared;
    info.n_tensors = static_cast<int32_t>(bytes.n_tensors > INT32_MAX ? INT32_MAX : bytes.n_tensors);
    info.file_bytes = file_bytes;
    info.total_bytes = bytes.total;
    info.dense_bytes = bytes.dense;
    info.expert_bytes = bytes.expert;
    info.expert_bytes_per_expert = bytes.expert_per_expert;
    info.expert_bytes_per_layer = bytes.expert_per_layer;
    static_assert(MOESTREAM_MAX_TENSOR_TYPES == kMaxGgmlTypeId);
    for (size_t t = 0; t < MOESTREAM_MAX_TENSOR_TYPES && t < bytes.count_by_type.size(); ++t)
        info.tensor_count_by_type[t] = bytes.count_by_type[t];
    info.io_mode = io_mode;
    copy_text(info.io_mode_reason, io_mode_reason);
    return info;
}

}  // namespace moe::capi
