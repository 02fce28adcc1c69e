#include "model/model.hpp"

#include "common/error.hpp"
#include "model/tensor_binder.hpp"

namespace moe {

std::unique_ptr<Model> Model::open(const std::string &path) { return bind(gguf::GgufFile::open(path)); }

std::unique_ptr<Model> Model::bind(std::unique_ptr<gguf::GgufFile> file) {
    std::unique_ptr<Model> m(new Model());
    m->file_ = std::move(file);
    m->bind_all();
    return m;
}

void Model::bind_all() {
    const gguf::GgufFile &f = *file_;
    hp_ = HParams::from_gguf(f);
    arch_ = find_architecture(hp_.arch);
    if (!arch_) {
        std::string known;
        for (const char *n : architecture_names()) known += std::string(known.empty() ? "" : ", ") + n;
        fail(Status::unsupported, "%s: architecture '%s' is not supported (supported: %s)", f.path().c_str(),
             hp_.arch.c_str(), known.c_str());
    }
    traits_ = arch_->traits(hp_);
    if (hp_.n_rot <= 0 || hp_.n_rot > hp_.head_dim_k || hp_.n_rot % 2 != 0)
        fail(Status::bad_format, "%s: rope.dimension_count %d must be even and at most head_dim %d",
             f.path().c_str(), hp_.n_rot, hp_.head_dim_k);
    if (hp_.n_head_kv <= 0 || hp_.n_head % hp_.n_head_kv != 0)
        fail(Status::bad_format, "%s: head_count %d is not a multiple of head_count_kv %d", f.path().c_str(),
             hp_.n_head, hp_.n_head_kv);

    TensorBinder b(f);
    const int64_t n_embd = hp_.n_embd;
    weights_.token_embd = b.matrix("token_embd.weight", n_embd, hp_.n_vocab);
    weights_.output_norm = b.vector("output_norm.weight", n_embd);
    weights_.output = b.matrix("output.weight", n_embd, hp_.n_vocab, !traits_.tied_output_allowed);
    if (!weights_.output) weights_.output = weights_.token_embd;
    weights_.rope_freqs = b.vector("rope_freqs.weight", hp_.n_rot / 2, false);
    if (!rope_angles_finite(rope_params()))
        fail(Status::bad_format, "%s: rope_freqs.weight holds a frequency factor that makes the rotary angles "
             "overflow (zero, tiny or not finite)", f.path().c_str());

    weights_.layers.resize(size_t(hp_.n_layer));
    for (int32_t l = 0; l < hp_.n_layer; ++l) arch_->bind_layer(b, hp_, l, weights_.layers[size_t(l)]);
    reject_unbound(b);

    bytes_ = account_bytes(f);
}

// A tensor the architecture does not use means the metadata does not
// describe the file (a block_count below the layers present, a bias this
// architecture has no place for): running without it would give wrong
// logits silently. llama.cpp's loader also refuses such files.
void Model::reject_unbound(const TensorBinder &b) const {
    const std::vector<const gguf::TensorInfo *> extra = b.unbound();
    if (!extra.empty())
        fail(Status::bad_format, "%s: tensor '%s' is not used by a %d-layer %s model (unused tensors: %zu)",
             file_->path().c_str(), extra.front()->name.c_str(), hp_.n_layer, hp_.arch.c_str(), extra.size());
}

namespace {

// Calls f on every matrix view of `w` (const or not), bound or not.
template <typename Weights, typename F>
void visit_matrices(Weights &w, F &&f) {
    f(w.token_embd);
    f(w.output);  // the same bytes as token_embd when tied
    for (auto &l : w.layers)
        for (auto *m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.router, &l.shexp_gate, &l.shexp_up, &l.shexp_down,
                        &l.shexp_gate_inp})
            f(*m);
}

}  // namespace

std::vector<const uint8_t *> Model::matrix_data() const {
    std::vector<const uint8_t *> out;
    visit_matrices(weights_, [&](const MatrixView &m) {
        if (m.data) out.push_back(m.data);
    });
    return out;
}

void Model::relocate_matrices(const std::function<const uint8_t *(const uint8_t *)> &where) {
    visit_matrices(weights_, [&](MatrixView &m) {
        if (m.data) m.data = where(m.data);
    });
}

RopeParams Model::rope_params() const {
    const float *factors = weights_.rope_freqs.empty() ? nullptr : weights_.rope_freqs.data();
    return RopeParams{hp_.n_rot, hp_.rope_freq_base, hp_.rope_freq_scale, factors};
}

std::vector<ExpertLayerLayout> Model::expert_layouts() const {
    std::vector<ExpertLayerLayout> out;
    out.reserve(weights_.layers.size());
    for (const LayerWeights &l : weights_.layers) out.push_back(l.experts);
    return out;
}

}  // namespace moe
