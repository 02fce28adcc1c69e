#include "model/tensor_roles.hpp"

#include <algorithm>

namespace moe {

std::optional<ExpertTensorName> parse_expert_tensor_name(std::string_view name) {
    constexpr std::string_view kPrefix = "blk.";
    if (name.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
    name.remove_prefix(kPrefix.size());
    uint64_t layer = 0;
    size_t digits = 0;
    while (digits < name.size() && name[digits] >= '0' && name[digits] <= '9') {
        layer = layer * 10 + uint64_t(name[digits] - '0');
        if (layer > UINT32_MAX) return std::nullopt;
        ++digits;
    }
    if (digits == 0 || (digits > 1 && name[0] == '0')) return std::nullopt;
    name.remove_prefix(digits);
    ExpertTensorName out;
    out.layer = static_cast<uint32_t>(layer);
    if (name == ".ffn_gate_exps.weight") out.matrix = ExpertMatrix::gate;
    else if (name == ".ffn_up_exps.weight") out.matrix = ExpertMatrix::up;
    else if (name == ".ffn_down_exps.weight") out.matrix = ExpertMatrix::down;
    else return std::nullopt;
    return out;
}

bool is_expert_tensor(const gguf::TensorInfo &t) {
    return t.fits_dims(3) && parse_expert_tensor_name(t.name).has_value();
}

std::vector<const gguf::TensorInfo *> dense_tensors(const gguf::GgufFile &file,
                                                    const std::function<bool(const gguf::TensorInfo &)> &take) {
    std::vector<const gguf::TensorInfo *> dense;
    for (const gguf::TensorInfo &t : file.tensors())
        if (!is_expert_tensor(t) && t.data && t.nbytes > 0 && (!take || take(t))) dense.push_back(&t);
    std::sort(dense.begin(), dense.end(), [](const gguf::TensorInfo *a, const gguf::TensorInfo *b) {
        return a->shard != b->shard ? a->shard < b->shard : a->file_offset < b->file_offset;
    });
    return dense;
}

std::vector<DenseRun> dense_runs(const std::vector<const gguf::TensorInfo *> &tensors) {
    constexpr uint64_t kMergeGap = 64 * 1024;  // read a small gap rather than issue another read
    std::vector<DenseRun> runs;
    for (const gguf::TensorInfo *t : tensors) {
        if (!runs.empty()) {
            DenseRun &last = runs.back();
            const uint64_t end = last.file_offset + last.length;
            if (t->shard == last.shard && t->file_offset <= end + kMergeGap) {
                last.length = std::max(end, t->file_offset + t->nbytes) - last.file_offset;
                continue;
            }
        }
        runs.push_back(DenseRun{t->shard, t->file_offset, t->nbytes, t->data});
    }
    return runs;
}

ModelBytes account_bytes(const gguf::GgufFile &file) {
    ModelBytes b;
    std::map<uint32_t, uint64_t> per_expert_by_layer;
    for (const gguf::TensorInfo &t : file.tensors()) {
        ++b.n_tensors;
        const auto type_id = static_cast<uint32_t>(t.type);
        if (type_id < b.count_by_type.size()) ++b.count_by_type[type_id];
        b.total += t.nbytes;
        if (!is_expert_tensor(t)) {
            b.dense += t.nbytes;
            continue;
        }
        const uint32_t layer = parse_expert_tensor_name(t.name)->layer;
        b.expert += t.nbytes;
        b.expert_bytes_by_layer[layer] += t.nbytes;
        // One expert's slice of this matrix (ne[2] experts, each a contiguous slice).
        if (t.ne[2] > 0) per_expert_by_layer[layer] += t.nbytes / uint64_t(t.ne[2]);
    }
    for (const auto &[layer, bytes] : b.expert_bytes_by_layer)
        if (bytes > b.expert_per_layer) b.expert_per_layer = bytes;
    for (const auto &[layer, bytes] : per_expert_by_layer)
        if (bytes > b.expert_per_expert) b.expert_per_expert = bytes;
    return b;
}

}  // namespace moe
