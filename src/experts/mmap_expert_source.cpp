#include "experts/mmap_expert_source.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace moe {

MmapExpertSource::MmapExpertSource(MmapSourceConfig config)
    : layers_(std::move(config.layers)),
      share_(config.expert_share_bytes),
      // Without a share every expert may stay resident: releasing the
      // neighbours would only unmap pages (splitting huge mappings) that the
      // next token faults back in.
      reach_(config.expert_share_bytes ? config.neighbour_reach_bytes : 0),
      advisor_(config.advisor ? std::move(config.advisor) : make_system_advisor()),
      pressure_(std::move(config.pressure)),
      pressure_stall_share_(config.pressure_stall_share),
      pressure_polls_in_a_row_(std::max<uint32_t>(config.pressure_polls_in_a_row, 1)),
      stats_(config.stats),
      open_layer_(layers_, "mmap expert source") {
    uint64_t total = 0;
    int32_t max_experts = 0;
    layer_base_.reserve(layers_.size());
    for (const ExpertLayerLayout &l : layers_) {
        layer_base_.push_back(uint32_t(total));
        total += uint64_t(std::max(l.n_expert, 0));
        max_experts = std::max(max_experts, l.n_expert);
        all_expert_bytes_ += l.bytes_per_expert() * uint64_t(std::max(l.n_expert, 0));
    }
    if (total >= kNone) fail(Status::unsupported, "mmap expert source: %llu experts are too many", (unsigned long long)total);
    layer_of_.resize(total);
    expert_of_.resize(total);
    for (size_t l = 0; l < layers_.size(); ++l)
        for (int32_t e = 0; e < layers_[l].n_expert; ++e) {
            layer_of_[layer_base_[l] + uint32_t(e)] = int32_t(l);
            expert_of_[layer_base_[l] + uint32_t(e)] = e;
        }
    prev_.assign(total, kNone);
    next_.assign(total, kNone);
    tracked_.assign(total, 0);
    pinned_.assign(total, 0);
    prefetched_unused_.assign(total, 0);
    missed_.reserve(size_t(max_experts));

    // Dense weights are needed by every token: bring them in once, keep them.
    for (const MappedRange &r : config.dense) {
        advisor_->will_need(r.data, r.length);
        counters_.dense_bytes_advised += r.length;
    }
}

bool MmapExpertSource::is_tracked(int32_t layer, int32_t expert) const {
    if (layer < 0 || size_t(layer) >= layers_.size() || expert < 0 || expert >= layers_[size_t(layer)].n_expert)
        return false;
    return tracked_[index_of(layer, expert)] != 0;
}

void MmapExpertSource::advise(uint32_t index, bool need) {
    const ExpertLayerLayout &lay = layers_[size_t(layer_of_[index])];
    const uint64_t e = uint64_t(expert_of_[index]);
    for (const ExpertMatrixLayout *m : {&lay.gate, &lay.up, &lay.down}) {
        if (!m->mapped || m->expert_stride == 0) continue;
        const uint8_t *p = m->mapped + e * m->expert_stride;
        if (need)
            advisor_->will_need(p, m->expert_stride);
        else
            advisor_->release(p, m->expert_stride);
    }
}

void MmapExpertSource::unlink(uint32_t i) {
    if (prev_[i] != kNone) next_[prev_[i]] = next_[i]; else head_ = next_[i];
    if (next_[i] != kNone) prev_[next_[i]] = prev_[i]; else tail_ = prev_[i];
    prev_[i] = next_[i] = kNone;
}

void MmapExpertSource::push_front(uint32_t i) {
    prev_[i] = kNone;
    next_[i] = head_;
    if (head_ != kNone) prev_[head_] = i;
    head_ = i;
    if (tail_ == kNone) tail_ = i;
}

bool MmapExpertSource::touch(uint32_t i) {
    if (tracked_[i]) {
        unlink(i);
        push_front(i);
        return true;
    }
    tracked_[i] = 1;
    tracked_bytes_ += bytes_of(i);
    push_front(i);
    return false;
}

void MmapExpertSource::release_untracked_neighbours(int32_t layer, int32_t expert) {
    if (reach_ == 0) return;
    const ExpertLayerLayout &lay = layers_[size_t(layer)];
    for (const ExpertMatrixLayout *m : {&lay.gate, &lay.up, &lay.down}) {
        if (!m->mapped || m->expert_stride == 0) continue;
        const int64_t span = int64_t((reach_ + m->expert_stride - 1) / m->expert_stride);
        const int32_t lo = int32_t(std::max<int64_t>(0, int64_t(expert) - span));
        const int32_t hi = int32_t(std::min<int64_t>(lay.n_expert - 1, int64_t(expert) + span));
        // Runs of consecutive untracked experts become one hint each.
        int32_t run = -1;
        for (int32_t e = lo; e <= hi + 1; ++e) {
            const bool untracked = e <= hi && e != expert && !tracked_[index_of(layer, e)];
            if (untracked && run < 0) run = e;
            if (!untracked && run >= 0) {
                advisor_->release(m->mapped + uint64_t(run) * m->expert_stride, uint64_t(e - run) * m->expert_stride);
                ++counters_.neighbour_releases;
                run = -1;
            }
        }
    }
}

uint64_t MmapExpertSource::limit() const {
    if (share_ == 0) return pressure_limit_;
    return pressure_limit_ == 0 ? share_ : std::min(share_, pressure_limit_);
}

bool MmapExpertSource::short_of_memory(uint64_t ceiling, uint64_t turnover) const {
    const std::optional<uint64_t> available = pressure_->available_bytes();
    if (!available) return true;
    const uint64_t need = ceiling + counters_.dense_bytes_advised + turnover;
    return *available < need + need / 16;
}

void MmapExpertSource::react_to_pressure() {
    const double stall = pressure_->stall_share();
    ++counters_.pressure_polls;
    if (stall < 0) return;
    const uint64_t ceiling = share_ ? share_ : all_expert_bytes_;
    stalled_polls_ = stall >= pressure_stall_share_ ? stalled_polls_ + 1 : 0;
    // The experts released since the previous poll to stay within the limit
    // stay in the page cache until the kernel reclaims them: with a share,
    // streaming through it drives that much more into the cache per step.
    // The reaction's own releases are left out: counting them would make
    // each reaction the reason for the next.
    const uint64_t turnover_total = counters_.bytes_released - counters_.bytes_released_under_pressure;
    const uint64_t turnover = turnover_total - turnover_at_poll_;
    turnover_at_poll_ = turnover_total;
    // Stalls are pressure only when they persist and the memory available
    // could not hold what we drive into the page cache: otherwise they are
    // someone else's (the system's signal counts every task) or of our own
    // making (filling the page cache with the model, compacting huge pages),
    // and releasing would only make us fault the same pages back in.
    bool pressure = stalled_polls_ >= pressure_polls_in_a_row_;
    if (pressure && !short_of_memory(ceiling, turnover)) {
        pressure = false;
        ++counters_.pressure_stalls_with_room;
    }
    if (pressure) {
        // Give back an eighth of what we hold per poll while the pressure
        // lasts: enough to matter within a few steps, not so much that one
        // reading empties the cache. The open layer's experts stay.
        const uint64_t held = std::min(tracked_bytes_, ceiling);
        pressure_limit_ = std::max<uint64_t>(held - held / 8, 1);
        ++counters_.pressure_events;
        const uint64_t before = counters_.bytes_released;
        shrink_to_share();
        counters_.bytes_released_under_pressure += counters_.bytes_released - before;
    } else if (pressure_limit_ != 0) {
        // No pressure: let the limit grow back by an eighth of the ceiling per poll.
        pressure_limit_ += std::max<uint64_t>(ceiling / 8, 1);
        if (pressure_limit_ >= ceiling) pressure_limit_ = 0;
    }
}

void MmapExpertSource::shrink_to_share() {
    const uint64_t lim = limit();
    if (lim == 0) return;
    uint32_t i = tail_;
    while (tracked_bytes_ > lim && i != kNone) {
        const uint32_t older = prev_[i];
        if (!pinned_[i]) {
            const uint64_t bytes = bytes_of(i);
            advise(i, false);
            unlink(i);
            tracked_[i] = 0;
            tracked_bytes_ -= bytes;
            ++counters_.evictions;
            counters_.bytes_released += bytes;
            if (stats_) {
                ++stats_->evictions;
                if (prefetched_unused_[i]) stats_->bytes_read_wasted += bytes;
            }
            prefetched_unused_[i] = 0;
        }
        i = older;
    }
}

void MmapExpertSource::begin_layer(int32_t layer, std::span<const int32_t> experts) {
    open_layer_.check_request(layers_, layer, experts, "begin_layer:");
    open_layer_.open(layer, experts);
    if (pressure_ && layer == 0) react_to_pressure();

    // Pin and order first, then make room, then hint: releasing before the new
    // reads start keeps the peak down, and the open layer's experts are never
    // among the released.
    missed_.clear();
    uint64_t hits = 0, missed_bytes = 0;
    for (int32_t e : experts) {
        const uint32_t i = index_of(layer, e);
        pinned_[i] = 1;
        pinned_bytes_ += bytes_of(i);
        if (touch(i)) {
            ++hits;
            if (prefetched_unused_[i]) {
                prefetched_unused_[i] = 0;
                if (stats_) ++stats_->prefetch_useful;
            }
        } else {
            missed_.push_back(i);
            missed_bytes += bytes_of(i);
        }
    }
    shrink_to_share();
    for (uint32_t i : missed_) advise(i, true);

    const uint64_t misses = missed_.size();
    counters_.hits += hits;
    counters_.misses += misses;
    counters_.bytes_advised += missed_bytes;
    if (stats_) {
        stats_->cache_hits += hits;
        stats_->cache_misses += misses;
        stats_->bytes_read_demand += missed_bytes;
        if (size_t(layer) < stats_->layer_hits.size()) {
            stats_->layer_hits[size_t(layer)] += hits;
            stats_->layer_misses[size_t(layer)] += misses;
        }
    }
}

ReadyExpert MmapExpertSource::next_ready() { return open_layer_.next(layers_); }

void MmapExpertSource::end_layer(int32_t layer) {
    open_layer_.expect_open(layer);
    // Every expert of the layer has been computed by now (one at a time or
    // as one group): drop the neighbours their faults mapped.
    for (int32_t e : open_layer_.handed_out()) release_untracked_neighbours(layer, e);
    for (int32_t e : open_layer_.requested()) pinned_[index_of(layer, e)] = 0;
    pinned_bytes_ = 0;
    open_layer_.close(layer);
}

void MmapExpertSource::prefetch(int32_t layer, std::span<const int32_t> experts, int32_t distance) {
    if (distance > 1) return;
    open_layer_.check_request(layers_, layer, experts, "prefetch:");
    missed_.clear();
    uint64_t bytes = 0;
    for (int32_t e : experts) {
        const uint32_t i = index_of(layer, e);
        if (tracked_[i]) continue;  // already advised: a hint would change nothing
        // A guess never pushes out the experts in use: hint only what fits
        // beside them.
        if (limit() && pinned_bytes_ + bytes + bytes_of(i) > limit()) break;
        touch(i);
        prefetched_unused_[i] = 1;
        missed_.push_back(i);
        bytes += bytes_of(i);
    }
    // The new experts are the most recent and fit beside the pinned ones, so
    // making room releases only older experts.
    shrink_to_share();
    for (uint32_t i : missed_) advise(i, true);
    counters_.prefetched += missed_.size();
    counters_.bytes_advised += bytes;
    if (stats_) {
        stats_->prefetch_issued += missed_.size();
        stats_->bytes_read_prefetch += bytes;
    }
}

}  // namespace moe
