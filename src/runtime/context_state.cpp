// Context::save_state / load_state: the context's side of the state file
// (docs/state-format.md). Everything is validated by the reader before any
// member changes, and the copy into place cannot fail, so a failed load
// leaves the context as it was.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "runtime/context.hpp"
#include "runtime/sampler_state.hpp"
#include "runtime/state_file.hpp"

namespace moe {
namespace {

// Layout 1: a token's row holds n_head_kv heads one after another, each head's
// elements consecutive (KvCache stores exactly that per position).
constexpr uint32_t kKvLayoutHeadMajorRows = 1;

template <typename T>
std::span<const uint8_t> as_bytes(const std::vector<T> &v, size_t n) {
    return {reinterpret_cast<const uint8_t *>(v.data()), n * sizeof(T)};
}

}  // namespace

state::StateShape Context::state_shape() const {
    const HParams &hp = model_->hparams();
    const KvCache &kv = forward_->kv();
    state::StateShape s;
    s.fingerprint = state::model_fingerprint(model_->file());
    s.n_layer = uint32_t(hp.n_layer);
    s.n_head_kv = uint32_t(hp.n_head_kv);
    s.head_dim_k = uint32_t(hp.head_dim_k);
    s.head_dim_v = uint32_t(hp.head_dim_v);
    s.n_ctx = uint32_t(n_ctx_);
    s.kv_type = kv.is_f32() ? GgmlType::F32 : GgmlType::F16;
    s.n_vocab = uint32_t(hp.n_vocab);
    s.kv_layout = kKvLayoutHeadMajorRows;
    s.k_row_bytes.assign(size_t(hp.n_layer), uint64_t(kv.k_dim()) * kv.element_bytes());
    s.v_row_bytes.assign(size_t(hp.n_layer), uint64_t(kv.v_dim()) * kv.element_bytes());
    for (const int32_t w : kv.layout().window) s.window.push_back(uint32_t(w));
    return s;
}

// The largest sampler section fits the allowance readers give optional sections.
static_assert(kSamplerSectionV2HeadBytes + 4 * size_t(kMaxPenaltyLastN) <= state::kOptionalSectionAllowance);

std::string Context::save_state(const std::string &path, const Sampler *sampler) {
    model_->file().refuse_as_output(path, "state file");
    // Reads in flight must not land while the state is captured.
    source_.source->drain();
    const state::StateShape shape = state_shape();
    std::vector<int32_t> positions(static_cast<size_t>(n_past_));
    std::iota(positions.begin(), positions.end(), 0);

    state::StateContents contents;
    contents.n_past = uint32_t(n_past_);
    contents.sections.push_back({state::SectionType::tokens, 0, {as_bytes(tokens_, size_t(n_past_))}});
    contents.sections.push_back({state::SectionType::positions, 0, {as_bytes(positions, positions.size())}});
    // A layer with a window saves only the positions it still reads (its
    // ring may no longer hold older ones): the file is then version 2.
    const KvCache &kv = forward_->kv();
    for (uint32_t l = 0; l < shape.n_layer; ++l) {
        const int32_t first = kv.first_needed(int32_t(l), n_past_);
        for (const auto &[part, type] : {std::pair{KvPart::k, state::SectionType::kv_k},
                                         std::pair{KvPart::v, state::SectionType::kv_v}}) {
            if (part == KvPart::v && shape.v_row_bytes[l] == 0) continue;
            const auto rows = kv.row_bytes(part, int32_t(l), first, n_past_);
            contents.sections.push_back({type, l, std::vector<std::span<const uint8_t>>(rows.begin(), rows.end())});
        }
    }
    std::vector<uint8_t> sampler_bytes;
    if (sampler) {
        sampler_bytes = encode_sampler_section(sampler->snapshot());
        contents.sections.push_back({state::SectionType::sampler, 0, {sampler_bytes}});
    }
    return state::write_state_file(path, shape, contents);
}

void Context::load_state(const std::string &path, Sampler *sampler) {
    source_.source->drain();
    const state::StateShape shape = state_shape();
    const state::LoadedState loaded = state::read_state_file(path, shape);
    // This context keeps no position table: positions must be 0..n_past-1.
    for (uint32_t t = 0; t < loaded.n_past; ++t)
        if (loaded.positions[t] != int32_t(t))
            fail(Status::bad_format, "%s: token %u is at position %d; this context needs positions 0..%u",
                 path.c_str(), t, loaded.positions[t], loaded.n_past - 1);

    SamplerSnapshot sampler_state;
    if (sampler) {
        if (!loaded.has_sampler)
            fail(Status::state_mismatch,
                 "%s: the file has no sampler section (saved without a sampler); load it without one", path.c_str());
        sampler_state = decode_sampler_section(loaded.sampler, path);
    }

    // Every check has passed: nothing below can fail. Each layer takes the
    // rows it reads from n_past on, the last of those the file holds (a file
    // may hold more: version 1 keeps every position).
    KvCache &kv = forward_->kv();
    const int32_t n_past = int32_t(loaded.n_past);
    for (uint32_t l = 0; l < shape.n_layer; ++l) {
        const int32_t first = kv.first_needed(int32_t(l), n_past);
        const uint32_t skipped = loaded.rows[l] - uint32_t(n_past - first);
        kv.write_rows(KvPart::k, int32_t(l), first, loaded.k[l].subspan(skipped * shape.k_row_bytes[l]));
        if (shape.v_row_bytes[l] != 0)
            kv.write_rows(KvPart::v, int32_t(l), first, loaded.v[l].subspan(skipped * shape.v_row_bytes[l]));
    }
    std::copy(loaded.tokens.begin(), loaded.tokens.end(), tokens_.begin());
    n_past_ = int32_t(loaded.n_past);
    if (sampler) sampler->restore(std::move(sampler_state));
}

}  // namespace moe
