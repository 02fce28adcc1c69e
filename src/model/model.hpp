// A loaded model: the indexed GGUF (kept mapped), its hyper-parameters, the
// architecture's traits and every weight bound by name. Dense weights are
// views into the mapping; routed experts are described by ExpertLayerLayout
// and read only through an ExpertSource.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/numa_memory.hpp"
#include "gguf/gguf_file.hpp"
#include "model/architecture.hpp"
#include "model/derived_matrices.hpp"
#include "model/hparams.hpp"
#include "model/rope.hpp"
#include "model/tensor_roles.hpp"
#include "model/weights.hpp"

namespace moe {

class ThreadPool;

// Where and by whom the matrices built at open (derived_matrices.hpp) are made.
struct ModelOpenOptions {
    NumaPlacement placement = NumaPlacement::local;  // their memory's, as the dense weights' copy
    ThreadPool *pool = nullptr;                      // builds them; null: the calling thread
};

class Model {
public:
    // Opens and binds; throws bad_format / unsupported naming the tensor or
    // key, out_of_memory when the matrices built at open cannot be had.
    static std::unique_ptr<Model> open(const std::string &path, const ModelOpenOptions &options = {});
    // Binds an already opened file (tests).
    static std::unique_ptr<Model> bind(std::unique_ptr<gguf::GgufFile> file, const ModelOpenOptions &options = {});
    // The checks of bind(), with the same errors, without binding: the
    // hyper-parameters, the architecture, every tensor's name, shape and
    // type, no tensor left over, the RoPE frequency factors. Of the tensor
    // data it reads rope_freqs.weight alone (a few hundred bytes), so it
    // costs a walk of the tensor table: moestream_inspect refuses with it
    // the files moestream_open refuses, and reports the bytes open counts.
    struct Checked {
        HParams hp;
        ModelBytes bytes;  // as bytes() of the opened model
    };
    static Checked check(const gguf::GgufFile &file);

    const gguf::GgufFile &file() const { return *file_; }
    const HParams &hparams() const { return hp_; }
    const ArchTraits &traits() const { return traits_; }
    const Architecture &architecture() const { return *arch_; }
    const ModelWeights &weights() const { return weights_; }
    const LayerWeights &layer(int32_t i) const { return weights_.layers[size_t(i)]; }
    std::vector<ExpertLayerLayout> expert_layouts() const;
    // RoPE as the hyper-parameters and rope_freqs.weight (if present) set it.
    RopeParams rope_params() const;

    // Where every matrix view into the file mapping points (one entry per
    // view; a tied output head repeats the embeddings' pointer). Matrices
    // built at open (derived_matrices.hpp) are not listed.
    std::vector<const uint8_t *> matrix_data() const;
    // Points every matrix view into the file mapping at `where(view.data)`
    // instead: used when the dense weights are copied out of the file
    // (runtime/dense_copy.hpp). The bytes must be the same.
    void relocate_matrices(const std::function<const uint8_t *(const uint8_t *)> &where);

    // Byte accounting shared with `inspect` (tensor_roles.hpp, and check()).
    const ModelBytes &bytes() const { return bytes_; }
    uint64_t expert_bytes() const { return bytes_.expert; }  // routed experts, all layers
    // Every other tensor, except those only read at open to build matrices,
    // plus the matrices built (derived_matrices.hpp): what stays resident.
    uint64_t dense_bytes() const { return bytes_.dense; }

private:
    Model() = default;
    void bind_all(const ModelOpenOptions &options);

    std::unique_ptr<gguf::GgufFile> file_;
    HParams hp_;
    const Architecture *arch_ = nullptr;
    ArchTraits traits_;
    ModelWeights weights_;
    DerivedMatrices derived_;  // matrices built at open that weights_ points into
    ModelBytes bytes_;
};

}  // namespace moe
