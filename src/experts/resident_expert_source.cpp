#include "experts/resident_expert_source.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace moe {

ResidentExpertSource::ResidentExpertSource(std::vector<ExpertLayerLayout> layouts, Stats *stats)
    : layouts_(std::move(layouts)), stats_(stats) {
    int32_t max_experts = 0;
    for (const ExpertLayerLayout &l : layouts_) max_experts = std::max(max_experts, l.n_expert);
    pending_.reserve(size_t(max_experts));
}

void ResidentExpertSource::begin_layer(int32_t layer, std::span<const int32_t> experts) {
    if (layer < 0 || size_t(layer) >= layouts_.size())
        fail(Status::internal, "expert source: layer %d out of range (%zu layers)", layer, layouts_.size());
    if (layer_ >= 0) fail(Status::internal, "expert source: layer %d begun while layer %d is open", layer, layer_);
    const ExpertLayerLayout &lay = layouts_[size_t(layer)];
    if (experts.size() > size_t(lay.n_expert))
        fail(Status::internal, "expert source: layer %d asked for %zu experts of %d", layer, experts.size(),
             lay.n_expert);
    pending_.clear();
    for (int32_t e : experts) {
        if (e < 0 || e >= lay.n_expert)
            fail(Status::internal, "expert source: layer %d has no expert %d", layer, e);
        pending_.push_back(e);
    }
    layer_ = layer;
    next_ = 0;
    if (stats_) {
        stats_->cache_hits += experts.size();
        if (size_t(layer) < stats_->layer_hits.size()) stats_->layer_hits[size_t(layer)] += experts.size();
    }
}

ReadyExpert ResidentExpertSource::next_ready() {
    if (layer_ < 0 || next_ >= pending_.size())
        fail(Status::internal, "expert source: next_ready called with no expert pending");
    const ExpertLayerLayout &lay = layouts_[size_t(layer_)];
    const int32_t e = pending_[next_++];
    ReadyExpert r;
    r.expert = e;
    r.view = mapped_expert_view(lay, e);
    return r;
}

void ResidentExpertSource::end_layer(int32_t layer) {
    if (layer != layer_) fail(Status::internal, "expert source: end_layer(%d) while layer %d is open", layer, layer_);
    layer_ = -1;
}

void ResidentExpertSource::prefetch(int32_t, std::span<const int32_t>) {}

}  // namespace moe
