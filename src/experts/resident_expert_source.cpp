#include "experts/resident_expert_source.hpp"

namespace moe {

ResidentExpertSource::ResidentExpertSource(std::vector<ExpertLayerLayout> layouts, Stats *stats)
    : layouts_(std::move(layouts)), stats_(stats), open_layer_(layouts_, "expert source") {}

void ResidentExpertSource::begin_layer(int32_t layer, std::span<const int32_t> experts) {
    open_layer_.check_request(layouts_, layer, experts, "begin_layer:");
    open_layer_.open(layer, experts);
    if (stats_) {
        stats_->cache_hits += experts.size();
        if (size_t(layer) < stats_->layer_hits.size()) stats_->layer_hits[size_t(layer)] += experts.size();
    }
}

ReadyExpert ResidentExpertSource::next_ready() { return open_layer_.next(layouts_); }

void ResidentExpertSource::end_layer(int32_t layer) { open_layer_.close(layer); }

void ResidentExpertSource::prefetch(int32_t, std::span<const int32_t>, int32_t) {}

}  // namespace moe
