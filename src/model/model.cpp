#include "model/model.hpp"

#include "common/error.hpp"
#include "model/tensor_binder.hpp"

namespace moe {

std::unique_ptr<Model> Model::open(const std::string &path, const ModelOpenOptions &options) {
    return bind(gguf::GgufFile::open(path), options);
}

std::unique_ptr<Model> Model::bind(std::unique_ptr<gguf::GgufFile> file, const ModelOpenOptions &options) {
    std::unique_ptr<Model> m(new Model());
    m->file_ = std::move(file);
    m->bind_all(options);
    return m;
}

namespace {

RopeParams rope_params_of(const HParams &hp, const VectorF32 &rope_freqs) {
    RopeParams p{hp.n_rot, hp.rope_freq_base, hp.rope_freq_scale, data_or_null(rope_freqs)};
    if (hp.rope_yarn) rope_enable_yarn(p, hp.rope_n_ctx_orig, hp.yarn_log_multiplier_given);
    p.mscale *= hp.rope_attn_factor;
    return p;
}

// A tensor the architecture does not use means the metadata does not
// describe the file (a block_count below the layers present, a bias this
// architecture has no place for): running without it would give wrong
// logits silently. llama.cpp's loader also refuses such files.
void reject_unbound(const TensorBinder &b, const HParams &hp) {
    const std::vector<const gguf::TensorInfo *> extra = b.unbound();
    if (!extra.empty())
        fail(Status::bad_format, "%s: tensor '%s' is not used by a %d-layer %s model (unused tensors: %zu)",
             b.file().path().c_str(), extra.front()->name.c_str(), hp.n_layer, hp.arch.c_str(), extra.size());
}

struct Binding {
    HParams hp;
    const Architecture *arch = nullptr;
    ArchTraits traits;
    ModelWeights weights;
    DerivedMatrices derived;  // what weights' views built at open point into
    ModelBytes bytes;
};

// Every rule a model file must meet, for Model::bind and Model::check alike.
// With Values::skip no tensor data is read but rope_freqs.weight's (its
// values are checked), the weights' 1-D tensors are left empty and no matrix
// is built.
Binding bind_file(const gguf::GgufFile &f, TensorBinder::Values values, const ModelOpenOptions &options = {}) {
    Binding out;
    out.hp = HParams::from_gguf(f);
    const HParams &hp = out.hp;
    out.arch = find_architecture(hp.arch);
    if (!out.arch) {
        std::string known;
        for (const char *n : architecture_names()) known += std::string(known.empty() ? "" : ", ") + n;
        fail(Status::unsupported, "%s: architecture '%s' is not supported (supported: %s)", f.path().c_str(),
             hp.arch.c_str(), known.c_str());
    }
    out.traits = out.arch->traits(hp);
    // HParams::from_gguf has checked the sizes (head counts, RoPE dimensions) the tensors are bound by.

    TensorBinder b(f, values);
    ModelWeights &w = out.weights;
    const int64_t n_embd = hp.n_embd;
    w.token_embd = b.matrix("token_embd.weight", n_embd, hp.n_vocab);
    w.output_norm = b.vector("output_norm.weight", n_embd);
    w.output = b.matrix("output.weight", n_embd, hp.n_vocab, !out.traits.tied_output_allowed);
    if (!w.output) w.output = w.token_embd;
    w.rope_freqs = b.checked_vector("rope_freqs.weight", hp.n_rot / 2, false);
    if (!rope_angles_finite(rope_params_of(hp, w.rope_freqs)))
        fail(Status::bad_format, "%s: rope_freqs.weight holds a frequency factor that makes the rotary angles "
             "overflow (zero, tiny or not finite)", f.path().c_str());

    w.layers.resize(size_t(hp.n_layer));
    for (int32_t l = 0; l < hp.n_layer; ++l) out.arch->bind_layer(b, hp, l, w.layers[size_t(l)]);
    reject_unbound(b, hp);
    b.derived().build(options.placement, options.pool);
    // Resident: the matrices built at open in place of the tensors they were built from.
    out.bytes = account_bytes(f);
    out.bytes.dense = out.bytes.dense - b.consumed_bytes() + b.derived().bytes();
    out.derived = std::move(b.derived());
    return out;
}

}  // namespace

Model::Checked Model::check(const gguf::GgufFile &file) {
    Binding bound = bind_file(file, TensorBinder::Values::skip);
    return {std::move(bound.hp), std::move(bound.bytes)};
}

void Model::bind_all(const ModelOpenOptions &options) {
    Binding bound = bind_file(*file_, TensorBinder::Values::read, options);
    hp_ = std::move(bound.hp);
    arch_ = bound.arch;
    traits_ = bound.traits;
    weights_ = std::move(bound.weights);
    derived_ = std::move(bound.derived);
    bytes_ = std::move(bound.bytes);
}

namespace {

// Calls f on every matrix view of `w` (const or not), bound or not.
template <typename Weights, typename F>
void visit_matrices(Weights &w, F &&f) {
    f(w.token_embd);
    f(w.output);  // the same bytes as token_embd when tied
    for (auto &l : w.layers) LayerWeights::for_each_matrix(l, f);
}

}  // namespace

std::vector<const uint8_t *> Model::matrix_data() const {
    std::vector<const uint8_t *> out;
    visit_matrices(weights_, [&](const MatrixView &m) {
        if (m.data && !derived_.holds(m.data)) out.push_back(m.data);
    });
    return out;
}

void Model::relocate_matrices(const std::function<const uint8_t *(const uint8_t *)> &where) {
    visit_matrices(weights_, [&](MatrixView &m) {
        if (m.data && !derived_.holds(m.data)) m.data = where(m.data);
    });
}

RopeParams Model::rope_params() const { return rope_params_of(hp_, weights_.rope_freqs); }

std::vector<ExpertLayerLayout> Model::expert_layouts() const {
    std::vector<ExpertLayerLayout> out;
    out.reserve(weights_.layers.size());
    for (const LayerWeights &l : weights_.layers) out.push_back(l.experts);
    return out;
}

}  // namespace moe
