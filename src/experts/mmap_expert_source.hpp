// ExpertSource over the read-only mapping of the GGUF, with residency managed
// by hints instead of reads. Right after routing, the routed experts' gate, up
// and down slices are advised WILLNEED so the kernel starts reading them while
// the layer's first experts compute. When the experts we have advised exceed
// the budget's share for experts, the least recently used ones that are not in
// use are released (MemoryAdvisor::release) and leave the resident set. Dense
// weights are advised once at open and never released. Under memory pressure
// (tasks stalling on memory for consecutive polls while the memory available
// could not hold all the source may keep, see memory_pressure.hpp) the source
// gives back an eighth of its experts per poll, least recently used first,
// and lets the limit grow back once the pressure is gone.
//
// Views always point into the mapping, so results cannot depend on what was
// advised or released: a released expert that is routed again simply faults
// its pages back in from the file.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/stats.hpp"
#include "experts/expert_source.hpp"
#include "experts/mapped_expert_queue.hpp"
#include "experts/memory_advisor.hpp"
#include "experts/memory_pressure.hpp"

namespace moe {

struct MappedRange {
    const uint8_t *data = nullptr;
    uint64_t length = 0;
};

struct MmapSourceConfig {
    std::vector<ExpertLayerLayout> layers;  // one per layer; mapped pointers set
    // Bytes of experts we keep advised at once; 0 = no limit (every expert may
    // stay resident). The experts of the open layer are never released, so
    // the tracked working set may exceed a share smaller than one layer needs.
    uint64_t expert_share_bytes = 0;
    // Page-cache folios can be large (up to a PMD, 2 MiB) and a fault maps
    // the whole folio, so computing one expert also maps the pages of its
    // neighbours. Once a layer computed, experts within this many bytes
    // of its slices that we do not track are released (at end_layer). 0 = never;
    // ignored (never) when expert_share_bytes is 0.
    uint64_t neighbour_reach_bytes = 2ull << 20;
    std::vector<MappedRange> dense;         // advised WILLNEED once, at construction
    std::unique_ptr<MemoryAdvisor> advisor; // null = make_system_advisor()
    // Polled once per step (at layer 0's begin_layer); null = never react.
    std::unique_ptr<MemoryPressure> pressure;
    // Stall share (of wall time since the previous poll) taken as a stall.
    double pressure_stall_share = 0.02;
    // Polls in a row that must find stalls before the source reacts: one
    // step's window can be a fraction of a second, and a single stalled
    // window (a compaction, another process's burst) is noise, not a
    // shortage. At least 1.
    uint32_t pressure_polls_in_a_row = 2;
    Stats *stats = nullptr;                 // may be null
};

// Bookkeeping counters of this source (also added to Stats when given).
struct MmapSourceCounters {
    uint64_t hits = 0;            // routed expert already advised and not released since
    uint64_t misses = 0;          // routed expert advised now
    uint64_t bytes_advised = 0;   // expert bytes advised WILLNEED (demand and prefetch)
    uint64_t evictions = 0;       // experts released
    uint64_t bytes_released = 0;
    uint64_t neighbour_releases = 0;  // release calls for untracked neighbours of computed experts
    uint64_t prefetched = 0;      // experts advised by prefetch()
    uint64_t dense_bytes_advised = 0;
    uint64_t pressure_polls = 0;       // stall shares read
    uint64_t pressure_events = 0;      // polls that found pressure and lowered the limit
    // Polls that found stalls persisting but memory enough for what the
    // source drives into the page cache (see short_of_memory) with a
    // sixteenth to spare: not pressure the source could relieve.
    uint64_t pressure_stalls_with_room = 0;
    uint64_t bytes_released_under_pressure = 0;
};

class MmapExpertSource final : public ExpertSource {
public:
    explicit MmapExpertSource(MmapSourceConfig config);

    void begin_layer(int32_t layer, std::span<const int32_t> experts) override;
    ReadyExpert next_ready() override;
    void end_layer(int32_t layer) override;
    // Advises the next layer's predicted experts; hints from further ahead
    // are ignored (the kernel's readahead of a mapping has no queue to keep
    // busy, and an early WILLNEED only adds to the memory under pressure).
    void prefetch(int32_t layer, std::span<const int32_t> experts, int32_t distance = 1) override;
    void drain() override {}

    const MmapSourceCounters &counters() const { return counters_; }
    // Bytes of the experts currently counted as resident (advised, not released).
    uint64_t tracked_bytes() const { return tracked_bytes_; }
    uint64_t expert_share_bytes() const { return share_; }
    // The lower limit memory pressure set (0 = none in force).
    uint64_t pressure_limit_bytes() const { return pressure_limit_; }
    bool is_tracked(int32_t layer, int32_t expert) const;
    const char *advisor_name() const { return advisor_->name(); }

private:
    static constexpr uint32_t kNone = UINT32_MAX;

    uint32_t index_of(int32_t layer, int32_t expert) const { return layer_base_[size_t(layer)] + uint32_t(expert); }
    uint64_t bytes_of(uint32_t index) const { return layers_[size_t(layer_of_[index])].bytes_per_expert(); }
    // Advises one expert's three slices (will_need or release).
    void advise(uint32_t index, bool need);
    // Makes `index` the most recently used expert, tracking it if it was not.
    // Returns true when it was already tracked.
    bool touch(uint32_t index);
    void unlink(uint32_t index);
    void push_front(uint32_t index);
    // Releases the untracked experts near `expert`'s slices (its computation
    // may have mapped them).
    void release_untracked_neighbours(int32_t layer, int32_t expert);
    // Releases least recently used, unpinned experts until the tracked bytes
    // fit the share (or nothing releasable is left).
    void shrink_to_share();
    // The bytes of experts we may keep now: the share and the pressure limit,
    // whichever is set and smaller (0 = no limit).
    uint64_t limit() const;
    // Reads the pressure signal and lowers or relaxes pressure_limit_.
    void react_to_pressure();
    // Whether the memory available is short of what the source drives into
    // the page cache, plus a sixteenth: what it may keep (`ceiling` of
    // experts and the dense weights) and the experts it released to stay
    // within its limit since the previous poll (`turnover`, still cached
    // until the kernel reclaims them). True when the signal cannot tell.
    bool short_of_memory(uint64_t ceiling, uint64_t turnover) const;

    std::vector<ExpertLayerLayout> layers_;
    std::vector<uint32_t> layer_base_;  // first flat index of each layer
    uint64_t share_ = 0;
    uint64_t reach_ = 0;
    std::unique_ptr<MemoryAdvisor> advisor_;
    std::unique_ptr<MemoryPressure> pressure_;
    double pressure_stall_share_ = 0;
    uint32_t pressure_polls_in_a_row_ = 1;
    uint32_t stalled_polls_ = 0;  // consecutive polls that found stalls
    // Bytes released to stay within the limit (not by a pressure reaction
    // itself) up to the previous poll.
    uint64_t turnover_at_poll_ = 0;
    uint64_t pressure_limit_ = 0;
    uint64_t all_expert_bytes_ = 0;
    Stats *stats_;
    MmapSourceCounters counters_;

    // Per expert (flat index), sized at construction: no allocation per token.
    std::vector<int32_t> layer_of_;
    std::vector<int32_t> expert_of_;
    std::vector<uint32_t> prev_, next_;  // LRU list of tracked experts (head = most recent)
    std::vector<uint8_t> tracked_, pinned_, prefetched_unused_;
    uint32_t head_ = kNone, tail_ = kNone;
    uint64_t tracked_bytes_ = 0;
    uint64_t pinned_bytes_ = 0;  // experts of the open layer

    MappedExpertQueue open_layer_;
    std::vector<uint32_t> missed_;  // experts advised by the current call (capacity: a layer)
};

}  // namespace moe
