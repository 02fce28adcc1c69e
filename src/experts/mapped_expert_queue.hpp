// The open layer of an expert source that computes straight from the mapped
// file (mmap and resident sources): which layer is open, the experts it asked
// for, and how many have been handed out, in request order. The storage is
// reserved for a whole layer up front, so no token allocates.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "common/error.hpp"
#include "experts/expert_source.hpp"

namespace moe {

class MappedExpertQueue {
public:
    // who: the source's name, the start of every error message.
    MappedExpertQueue(std::span<const ExpertLayerLayout> layouts, const char *who) : who_(who) {
        int32_t max_experts = 0;
        for (const ExpertLayerLayout &l : layouts) max_experts = std::max(max_experts, l.n_expert);
        requested_.reserve(size_t(max_experts));
    }

    // Fails unless `layer` and every one of `experts` exist (what: the call,
    // for the message).
    void check_request(std::span<const ExpertLayerLayout> layouts, int32_t layer, std::span<const int32_t> experts,
                       const char *what) const {
        if (layer < 0 || size_t(layer) >= layouts.size())
            fail(Status::internal, "%s: %s layer %d out of range (%zu layers)", who_, what, layer, layouts.size());
        const ExpertLayerLayout &lay = layouts[size_t(layer)];
        if (experts.size() > size_t(lay.n_expert))
            fail(Status::internal, "%s: %s layer %d asked for %zu experts of %d", who_, what, layer, experts.size(),
                 lay.n_expert);
        for (int32_t e : experts)
            if (e < 0 || e >= lay.n_expert) fail(Status::internal, "%s: %s layer %d has no expert %d", who_, what, layer, e);
    }

    // The caller has checked the request (check_request).
    void open(int32_t layer, std::span<const int32_t> experts) {
        if (layer_ >= 0) fail(Status::internal, "%s: layer %d begun while layer %d is open", who_, layer, layer_);
        requested_.assign(experts.begin(), experts.end());
        handed_out_ = 0;
        layer_ = layer;
    }

    ReadyExpert next(std::span<const ExpertLayerLayout> layouts) {
        if (layer_ < 0 || handed_out_ >= requested_.size())
            fail(Status::internal, "%s: next_ready called with no expert pending", who_);
        ReadyExpert r;
        r.expert = requested_[handed_out_++];
        r.view = mapped_expert_view(layouts[size_t(layer_)], r.expert);
        return r;
    }

    // Fails unless `layer` is the open one: for sources with work to do
    // before close().
    void expect_open(int32_t layer) const {
        if (layer != layer_) fail(Status::internal, "%s: end_layer(%d) while layer %d is open", who_, layer, layer_);
    }

    void close(int32_t layer) {
        expect_open(layer);
        requested_.clear();
        handed_out_ = 0;
        layer_ = -1;
    }

    bool is_open() const { return layer_ >= 0; }
    std::span<const int32_t> requested() const { return requested_; }
    std::span<const int32_t> handed_out() const { return {requested_.data(), handed_out_}; }

private:
    const char *who_;
    int32_t layer_ = -1;
    std::vector<int32_t> requested_;
    size_t handed_out_ = 0;
};

}  // namespace moe
