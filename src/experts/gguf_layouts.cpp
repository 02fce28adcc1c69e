#include "experts/gguf_layouts.hpp"

#include "common/error.hpp"
#include "experts/packed_file.hpp"
#include "model/model.hpp"
#include "model/tensor_roles.hpp"

namespace moe {

std::vector<ExpertLayerLayout> expert_layouts_from_gguf(const gguf::GgufFile &file) {
    // Every rule open applies (Model::check, as moestream_inspect): the
    // tensors below are taken by name alone, so a file whose tensors do not
    // match its metadata would otherwise be packed although open refuses it.
    const HParams hp = Model::check(file).hp;
    std::vector<ExpertLayerLayout> layers(static_cast<size_t>(hp.n_layer));
    for (const gguf::TensorInfo &t : file.tensors()) {
        if (!is_expert_tensor(t)) continue;
        const ExpertTensorName name = *parse_expert_tensor_name(t.name);
        if (name.layer >= layers.size())
            fail(Status::bad_format, "%s: tensor %s names layer %u of %zu", file.path().c_str(), t.name.c_str(),
                 name.layer, layers.size());
        ExpertLayerLayout &l = layers[name.layer];
        const int32_t n_expert = static_cast<int32_t>(t.ne[2]);
        if (n_expert <= 0 || (l.n_expert != 0 && l.n_expert != n_expert))
            fail(Status::bad_format, "%s: tensor %s has %d experts, its layer %d", file.path().c_str(), t.name.c_str(),
                 n_expert, l.n_expert);
        l.n_expert = n_expert;
        ExpertMatrixLayout &m = name.matrix == ExpertMatrix::gate ? l.gate : name.matrix == ExpertMatrix::up ? l.up : l.down;
        m.type = t.type;
        m.cols = t.ne[0];
        m.rows = t.ne[1];
        m.shard = t.shard;
        m.file_offset = t.file_offset;
        m.expert_stride = t.nbytes / uint64_t(n_expert);
        m.mapped = t.data;
    }
    for (size_t i = 0; i < layers.size(); ++i)
        if (layers[i].n_expert > 0 && (layers[i].up.rows == 0 || layers[i].down.rows == 0))
            fail(Status::bad_format, "%s: layer %zu has expert tensors but no up or down projection",
                 file.path().c_str(), i);
    return layers;
}

std::vector<std::string> shard_paths_of(const gguf::GgufFile &file) {
    std::vector<std::string> paths;
    for (size_t i = 0; i < file.n_shards(); ++i) paths.push_back(file.shard_path(i));
    return paths;
}

uint64_t model_fingerprint_of(const gguf::GgufFile &file) {
    return model_fingerprint(file.header_bytes(), file.header_size());
}

}  // namespace moe
