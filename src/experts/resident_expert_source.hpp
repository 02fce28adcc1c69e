// ExpertSource over the read-only mapping of the GGUF: every expert is
// "resident" (the page cache backs it), so requests come back at once, in
// request order. Counts every request as a cache hit.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/stats.hpp"
#include "experts/expert_source.hpp"
#include "experts/mapped_expert_queue.hpp"

namespace moe {

class ResidentExpertSource final : public ExpertSource {
public:
    // layouts: one per layer; stats may be null.
    ResidentExpertSource(std::vector<ExpertLayerLayout> layouts, Stats *stats);

    void begin_layer(int32_t layer, std::span<const int32_t> experts) override;
    ReadyExpert next_ready() override;
    void end_layer(int32_t layer) override;
    void prefetch(int32_t layer, std::span<const int32_t> experts, int32_t distance = 1) override;
    void drain() override {}

private:
    std::vector<ExpertLayerLayout> layouts_;
    Stats *stats_;
    MappedExpertQueue open_layer_;
};

}  // namespace moe
