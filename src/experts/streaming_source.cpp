#include "experts/streaming_source.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "common/monotonic_clock.hpp"
#include "experts/usage_profile.hpp"
#include "io/direct_fallback.hpp"

namespace moe {

namespace {

const ExpertMatrixLayout &matrix_of(const ExpertLayerLayout &l, int i) { return i == 0 ? l.gate : i == 1 ? l.up : l.down; }

// Registered buffers are limited to 1 GiB each; regions end on slot boundaries
// so a read never straddles two of them.
constexpr uint64_t kMaxRegisteredRegion = 1ull << 30;

uint64_t part_stride(uint64_t length, uint64_t alignment) { return io::round_up(length, alignment > 1 ? alignment : 64); }

}  // namespace

uint64_t StreamingExpertSource::slot_bytes_for(const std::vector<ExpertLayerLayout> &layers, const PackedFile *packed,
                                               bool direct) {
    if (packed) return io::round_up(packed->max_extent_bytes(), io::kDirectAlignment);
    const uint64_t align = direct ? io::kDirectAlignment : 1;
    uint64_t best = 0;
    for (const auto &l : layers) {
        if (l.n_expert <= 0) continue;
        uint64_t sum = 0;
        for (int i = 0; i < 3; ++i) {
            const uint64_t b = matrix_of(l, i).expert_bytes();
            if (b) sum += part_stride(io::aligned_length_bound(b, align), align);
        }
        best = std::max(best, sum);
    }
    return io::round_up(best, io::kDirectAlignment);
}

StreamingExpertSource::StreamingExpertSource(StreamingSourceConfig config) : cfg_(std::move(config)) {
    stats_ = cfg_.stats ? cfg_.stats : &own_stats_;
    n_layer_ = static_cast<uint32_t>(cfg_.layers.size());
    if (n_layer_ == 0 || n_layer_ > MOESTREAM_MAX_LAYERS)
        fail(Status::invalid_argument, "expert source: %u layers (1..%d supported)", n_layer_, MOESTREAM_MAX_LAYERS);
    uint32_t max_expert = 0;
    for (const auto &l : cfg_.layers) max_expert = std::max<uint32_t>(max_expert, l.n_expert > 0 ? uint32_t(l.n_expert) : 0);
    if (max_expert == 0) fail(Status::invalid_argument, "expert source: the model has no routed experts");
    n_expert_ = max_expert;
    if (cfg_.slots == 0) fail(Status::invalid_argument, "expert source: the cache needs at least one slot");
    n_slots_ = std::min<uint32_t>(cfg_.slots, n_layer_ * n_expert_);
    alignment_ = cfg_.direct ? io::kDirectAlignment : 1;

    if (!cfg_.packed_path.empty()) {
        packed_ = std::make_unique<PackedFile>(PackedFile::open(cfg_.packed_path, cfg_.model_fingerprint, cfg_.layers));
        files_.emplace_back(cfg_.packed_path, cfg_.direct);
    } else {
        for (const auto &p : cfg_.shard_paths) files_.emplace_back(p, cfg_.direct);
        for (const auto &l : cfg_.layers)
            for (int i = 0; i < 3 && l.n_expert > 0; ++i) {
                const ExpertMatrixLayout &m = matrix_of(l, i);
                if (m.expert_bytes() && m.shard >= files_.size())
                    fail(Status::invalid_argument, "expert source: a layer refers to shard %u of %zu", m.shard,
                         files_.size());
                // One read carries at most 4 GiB (ReadRequest::length).
                if (io::aligned_length_bound(m.expert_bytes(), io::kDirectAlignment) > UINT32_MAX)
                    fail(Status::unsupported, "expert source: one expert's matrix of %llu bytes is more than a read carries",
                         (unsigned long long)m.expert_bytes());
            }
    }
    slot_bytes_ = slot_bytes_for(cfg_.layers, packed_.get(), cfg_.direct);
    arena_ = SlotArena(uint64_t(n_slots_) * slot_bytes_, cfg_.numa);

    io::DirectFallbackBackend *fallback = nullptr;  // inside backend_: registers the files below
    {
        auto inner = cfg_.backend_override ? std::move(cfg_.backend_override)
                                           : io::make_read_backend(cfg_.backend, std::max<uint32_t>(cfg_.queue_depth, 4));
        // Below the observer: a read refused through O_DIRECT and read again
        // buffered is one read to it, as to this source.
        auto owned = std::make_unique<io::DirectFallbackBackend>(std::move(inner));
        fallback = owned.get();
        auto observed = std::make_unique<io::ObservedBackend>(std::move(owned));
        observed_ = observed.get();
        backend_ = std::move(observed);
    }
    if (slot_bytes_ <= kMaxRegisteredRegion) {
        std::vector<io::MemoryRegion> regions;
        const uint64_t per_region = std::max<uint64_t>(1, kMaxRegisteredRegion / slot_bytes_);
        for (uint64_t s = 0; s < n_slots_; s += per_region) {
            const uint64_t n = std::min<uint64_t>(per_region, n_slots_ - s);
            regions.push_back(io::MemoryRegion{arena_.data() + s * slot_bytes_, n * slot_bytes_});
        }
        backend_->register_memory(regions);
    }
    if (!backend_->memory_pinned()) arena_.populate();
    for (const auto &f : files_) {
        const uint32_t id = fallback->add_read_file(f);
        observed_->name_file(id, f.path());
        file_ids_.push_back(id);
    }

    const uint32_t n_keys = n_layer_ * n_expert_;
    policy_ = make_cache_policy(cfg_.policy, n_keys, n_slots_, cfg_.profile);
    key_state_.assign(n_keys, KeyState::absent);
    key_slot_.assign(n_keys, -1);
    key_stamp_.assign(n_keys, 0);
    awaiting_visit_.assign(n_keys, 0);
    slots_.resize(n_slots_);
    for (uint32_t s = n_slots_; s > 0; --s) free_slots_.push_back(int32_t(s - 1));
    demoted_.reserve(n_slots_);
    demand_queue_.reserve(n_expert_);
    prefetch_queue_.reserve(2 * n_slots_);
    far_queue_.reserve(2 * n_slots_);
    prefetched_by_layer_.resize(n_layer_);
    for (auto &keys : prefetched_by_layer_) keys.reserve(n_expert_);
    retries_.reserve(backend_->queue_depth());  // a full queue of cancelled parts
    // Hints start just above the bar: the first wrong read stops a rank until it proves itself.
    const float start_precision = std::min(1.0f, cfg_.prefetch_min_precision + 0.05f);
    hint_precision_.assign(kHintDistances * n_layer_ * kHintRanks, start_precision);
    hint_scored_.assign(kHintDistances * n_layer_ * kHintRanks, 0);
    rank_precision_.assign(kHintDistances * kHintRanks, start_precision);
    hinted_.resize(kHintDistances * n_layer_);
    for (auto &h : hinted_) h.reserve(n_expert_);
    ready_.reserve(n_expert_);
    layer_pins_.reserve(n_expert_);
    completions_.resize(backend_->queue_depth());
    usage_.n_layer = n_layer_;
    usage_.n_expert = n_expert_;
    usage_.counts.assign(n_keys, 0);
    last_experts_.resize(n_layer_);
    for (auto &v : last_experts_) v.reserve(n_expert_);

    // Warm start: read the learned hot set in the background.
    for (uint32_t key : policy_->pinned()) {
        if (key >= n_keys || key_state_[key] != KeyState::absent) continue;
        key_state_[key] = KeyState::queued_prefetch;
        prefetch_queue_.push_back(key);
    }
}

StreamingExpertSource::~StreamingExpertSource() {
    try {
        drain();
    } catch (...) {
        // Nothing useful to do with a failed read while closing.
    }
    try {
        save_profile();
    } catch (const std::exception &e) {
        // The profile is only a hint for the next run: closing goes on, but the caller hears of it.
        cfg_.log.write(MOESTREAM_LOG_WARN, "usage profile not saved: %s", e.what());
    }
}

void StreamingExpertSource::save_profile() const {
    if (cfg_.profile_save_path.empty()) return;
    // A run that routed nothing (an open that failed later, a context closed
    // unused) has nothing to add and leaves the file as it is.
    if (std::all_of(usage_.counts.begin(), usage_.counts.end(), [](uint64_t c) { return c == 0; })) return;
    add_to_usage_profile(cfg_.profile_save_path, cfg_.model_fingerprint, usage_, cfg_.profile);
}

uint32_t StreamingExpertSource::plan_parts(uint32_t key, Part out[3]) const {
    const int32_t layer = layer_of(key), expert = expert_of(key);
    if (packed_) {
        const PackedLayer &p = packed_->layers()[size_t(layer)];
        out[0] = Part{0, 0, p.extent_of(expert), p.extent_bytes, 0, p.down_offset + p.down_bytes, 0};
        return 1;
    }
    const ExpertLayerLayout &l = cfg_.layers[size_t(layer)];
    uint32_t n = 0;
    uint64_t cursor = 0;
    for (int i = 0; i < 3; ++i) {
        const ExpertMatrixLayout &m = matrix_of(l, i);
        const uint64_t bytes = m.expert_bytes();
        if (!bytes) continue;
        const io::AlignedRange r = io::align_range(m.file_offset + uint64_t(expert) * m.expert_stride, bytes, alignment_);
        out[n++] = Part{m.shard, uint32_t(i), r.offset, r.length, cursor, r.skip + bytes, r.skip};
        cursor += part_stride(r.length, alignment_);
    }
    return n;
}

ExpertView StreamingExpertSource::view_of(int32_t s) const {
    const uint8_t *base = slot_data(s);
    const uint32_t key = slots_[size_t(s)].key;
    ExpertView v;
    if (packed_) {
        const PackedLayer &p = packed_->layers()[size_t(layer_of(key))];
        v.gate = p.gate_bytes ? base + p.gate_offset : nullptr;
        v.up = base + p.up_offset;
        v.down = base + p.down_offset;
        return v;
    }
    Part parts[3];
    const uint32_t n = plan_parts(key, parts);
    for (uint32_t i = 0; i < n; ++i) {
        const uint8_t *p = base + parts[i].slot_offset + parts[i].skip;
        (parts[i].matrix == 0 ? v.gate : parts[i].matrix == 1 ? v.up : v.down) = p;
    }
    return v;
}

bool StreamingExpertSource::evictable_cb(void *ctx, uint32_t key) {
    auto *self = static_cast<StreamingExpertSource *>(ctx);
    const int32_t s = self->key_slot_[key];
    if (s < 0) return false;
    const Slot &sl = self->slots_[size_t(s)];
    // A prefetch waiting for its layer's visit is not the policy's to take:
    // the policy sees an expert nobody has used yet and would pick it first.
    return sl.busy && !sl.loading && sl.pins == 0 && !self->awaiting_visit_[key];
}

void StreamingExpertSource::evict(int32_t s) {
    Slot &sl = slots_[size_t(s)];
    policy_->on_remove(sl.key);
    if (sl.prefetched) stats_->bytes_read_wasted += sl.bytes;
    ++stats_->evictions;
    key_state_[sl.key] = KeyState::absent;
    key_slot_[sl.key] = -1;
    sl = Slot{};
}

int32_t StreamingExpertSource::acquire_slot(bool for_demand) {
    if (!free_slots_.empty()) {
        const int32_t s = free_slots_.back();
        free_slots_.pop_back();
        return s;
    }
    while (!demoted_.empty()) {
        const int32_t s = demoted_.back();
        demoted_.pop_back();
        const Slot &sl = slots_[size_t(s)];
        if (sl.busy && !sl.loading && sl.pins == 0 && sl.demoted && sl.prefetched) {
            evict(s);
            return s;
        }
    }
    uint32_t victim = 0;
    if (policy_->choose_victim(&evictable_cb, this, &victim)) {
        const int32_t s = key_slot_[victim];
        evict(s);
        return s;
    }
    if (!for_demand) return -1;
    // Demand beats the policy's pinned hot set when nothing else can go.
    for (uint32_t s = 0; s < n_slots_; ++s) {
        const Slot &sl = slots_[s];
        if (sl.busy && !sl.loading && sl.pins == 0) {
            evict(int32_t(s));
            return int32_t(s);
        }
    }
    return -1;
}

void StreamingExpertSource::start_read(uint32_t key, int32_t s, bool demand) {
    Slot &sl = slots_[size_t(s)];
    Part parts[3];
    const uint32_t n = plan_parts(key, parts);
    sl = Slot{};
    sl.key = key;
    sl.busy = true;
    sl.loading = true;
    sl.demand = demand;
    sl.prefetched = !demand;
    sl.via_prefetch = !demand;
    sl.parts_left = uint8_t(n);
    if (demand) {
        sl.pins = 1;
        layer_pins_.push_back(s);
    } else {
        ++stats_->prefetch_issued;
    }
    key_state_[key] = KeyState::loading;
    key_slot_[key] = s;
    for (uint32_t i = 0; i < n; ++i)
        backend_->submit(io::ReadRequest{file_ids_[parts[i].file], parts[i].offset, uint32_t(parts[i].length),
                                         slot_data(s) + parts[i].slot_offset, (uint64_t(s) << 2) | i});
}

void StreamingExpertSource::pump() {
    const uint32_t depth = backend_->queue_depth();
    const uint32_t parts_per_expert = packed_ ? 1 : 3;
    while (!retries_.empty()) {
        if (backend_->in_flight() >= depth) return;
        const auto [s, part] = retries_.back();
        retries_.pop_back();
        Slot &sl = slots_[size_t(s)];
        Part parts[3];
        plan_parts(sl.key, parts);
        const Part &p = parts[part];
        backend_->submit(io::ReadRequest{file_ids_[p.file], p.offset, uint32_t(p.length), slot_data(s) + p.slot_offset,
                                         (uint64_t(s) << 2) | part});
    }
    if (!start_queued(demand_queue_, demand_head_, KeyState::queued_demand, depth, parts_per_expert)) return;
    // While the running layer waits on a read, no prefetch starts: the device
    // has no priorities, so a prefetch beside a demand read would halve the
    // demand read's bandwidth and stretch the wait the compute cannot hide.
    // The prefetches start the moment the last demand read lands and run
    // while the layer computes. Otherwise they use at most half the queue, so
    // a demand read never finds it full of speculation.
    if (demand_waiting()) return;
    const uint32_t prefetch_depth = std::max<uint32_t>(parts_per_expert, depth / 2);
    if (!start_queued(prefetch_queue_, prefetch_head_, KeyState::queued_prefetch, prefetch_depth, parts_per_expert))
        return;
    start_queued(far_queue_, far_head_, KeyState::queued_prefetch, prefetch_depth, parts_per_expert);
}

bool StreamingExpertSource::start_queued(std::vector<uint32_t> &queue, size_t &head, KeyState queued,
                                         uint32_t depth_limit, uint32_t parts_per_expert) {
    const bool demand = queued == KeyState::queued_demand;
    while (head < queue.size()) {
        const uint32_t key = queue[head];
        if (key_state_[key] != queued) {  // dropped or already started since it was queued
            ++head;
            continue;
        }
        if (backend_->in_flight() + parts_per_expert > depth_limit) return false;
        const int32_t s = acquire_slot(demand);
        if (s < 0) return false;
        ++head;
        start_read(key, s, demand);
    }
    queue.clear();
    head = 0;
    return true;
}

void StreamingExpertSource::release_slot(int32_t s) {
    Slot &sl = slots_[size_t(s)];
    key_state_[sl.key] = KeyState::absent;
    key_slot_[sl.key] = -1;
    auto it = std::find(layer_pins_.begin(), layer_pins_.end(), s);
    if (it != layer_pins_.end()) layer_pins_.erase(it);
    sl = Slot{};
    free_slots_.push_back(s);
}

void StreamingExpertSource::process(const io::ReadCompletion &c) {
    const int32_t s = int32_t(c.tag >> 2);
    const uint32_t part = uint32_t(c.tag & 3);
    Slot &sl = slots_[size_t(s)];
    Part parts[3];
    plan_parts(sl.key, parts);
    const Part &p = parts[part];
    if (c.result == -ECANCELED) {
        // Cancelled as a wrong prefetch; if it is needed after all, read it again.
        if (sl.demand) {
            retries_.emplace_back(s, part);
            return;
        }
        sl.cancelled_parts |= uint8_t(1u << part);
    } else if (c.result < 0) {
        if (!sl.error) sl.error = int(-c.result);
        sl.fail_offset = p.offset;
        sl.fail_file = p.file;
    } else if (uint64_t(c.result) < p.need) {
        sl.bytes += uint64_t(c.result);  // delivered all the same: counted, as wasted, with the rest
        if (sl.problem.empty())
            sl.problem = format("short read: %lld of %llu bytes at offset %llu of %s", (long long)c.result,
                                (unsigned long long)p.need, (unsigned long long)p.offset, files_[p.file].path().c_str());
    } else {
        sl.bytes += uint64_t(c.result);
    }
    if (--sl.parts_left == 0) finish_slot(s);
}

void StreamingExpertSource::finish_slot(int32_t s) {
    Slot &sl = slots_[size_t(s)];
    const int32_t layer = layer_of(sl.key), expert = expert_of(sl.key);
    if (sl.cancelled_parts && !sl.error && sl.problem.empty()) {
        if (!sl.demand) {
            count_bytes_read(sl, true);  // the parts that landed before the cancel
            release_slot(s);
            return;
        }
        for (uint32_t part = 0; part < 3; ++part)
            if (sl.cancelled_parts & (1u << part)) {
                retries_.emplace_back(s, part);
                ++sl.parts_left;
            }
        sl.cancelled_parts = 0;
        return;
    }
    if (!sl.error && sl.problem.empty() && packed_ && cfg_.verify_checksums)
        sl.problem = packed_->check_extent(slot_data(s), layer, expert);
    if ((sl.error || !sl.problem.empty()) && sl.demand && sl.via_prefetch) {
        reread_on_demand(s);
        return;
    }
    if (sl.error || !sl.problem.empty()) {
        if (sl.demand && pending_error_.empty()) {
            if (sl.error) {
                char buf[128];
                const char *text = strerror_r(sl.error, buf, sizeof buf);
                pending_error_ = format("cannot read expert %d of layer %d from %s at offset %llu: %s (errno %d)", expert,
                                        layer, files_[sl.fail_file].path().c_str(), (unsigned long long)sl.fail_offset,
                                        text, sl.error);
            } else {
                pending_error_ = format("cannot read expert %d of layer %d: %s", expert, layer, sl.problem.c_str());
            }
        }
        count_bytes_read(sl, true);
        release_slot(s);
        return;
    }
    sl.loading = false;
    key_state_[sl.key] = KeyState::resident;
    // A read-ahead the running layer has not asked for is not a use yet.
    if (sl.demand)
        policy_->on_insert(sl.key, visit_);
    else
        policy_->on_prefetch(sl.key, visit_);
    count_bytes_read(sl, false);
    if (sl.demand) ready_.push_back(s);
    else if (sl.demoted) demoted_.push_back(s);
}

void StreamingExpertSource::reread_on_demand(int32_t s) {
    // A prefetch is a guess: its failure is not the layer's to report. The
    // layer reads the expert itself and fails only if that read fails too.
    // The layer counted it as a (useful) hit when it found it loading; it
    // was a miss. (Stats reset since then leave nothing to take back.)
    const Slot &sl = slots_[size_t(s)];
    const uint32_t key = sl.key;
    const size_t layer = size_t(layer_of(key));
    for (uint64_t *counted : {&stats_->cache_hits, &stats_->layer_hits[layer], &stats_->prefetch_useful})
        if (*counted > 0) --*counted;
    ++stats_->cache_misses;
    ++stats_->layer_misses[layer];
    count_bytes_read(sl, true);
    release_slot(s);
    // Within the queue's capacity: it holds at most the layer's experts.
    key_state_[key] = KeyState::queued_demand;
    demand_queue_.push_back(key);
}

void StreamingExpertSource::count_bytes_read(const Slot &sl, bool discarded) {
    (sl.via_prefetch ? stats_->bytes_read_prefetch : stats_->bytes_read_demand) += sl.bytes;
    if (discarded) stats_->bytes_read_wasted += sl.bytes;
}

void StreamingExpertSource::poll() {
    // Between two experts' compute: take what has landed so freed queue room
    // goes straight back to the device (demand first, then prefetches).
    if (backend_->in_flight() > 0) {
        const size_t n = backend_->reap(completions_, false);
        for (size_t i = 0; i < n; ++i) process(completions_[i]);
    }
    pump();
}

void StreamingExpertSource::wait_and_process() {
    const uint64_t t0 = monotonic_ns();
    const size_t n = backend_->reap(completions_, true);
    stats_->io_wait_ns += monotonic_ns() - t0;
    for (size_t i = 0; i < n; ++i) process(completions_[i]);
    // The last demand read may just have landed: start the held prefetches
    // before the layer computes it.
    pump();
}

void StreamingExpertSource::begin_layer(int32_t layer, std::span<const int32_t> experts) {
    if (current_layer_ >= 0) end_layer(current_layer_);
    if (layer < 0 || uint32_t(layer) >= n_layer_)
        fail(Status::invalid_argument, "expert source: layer %d out of range (%u layers)", layer, n_layer_);
    const int32_t n_layer_expert = cfg_.layers[size_t(layer)].n_expert;
    if (experts.size() > size_t(n_layer_expert))
        fail(Status::invalid_argument, "expert source: layer %d asked for %zu experts of %d", layer, experts.size(),
             n_layer_expert);
    if (experts.size() > n_slots_)
        fail(Status::out_of_memory, "expert cache of %u slots cannot hold the %zu experts layer %d needs at once",
             n_slots_, experts.size(), layer);
    ++visit_;
    current_layer_ = layer;
    expected_ = uint32_t(experts.size());
    returned_ = 0;
    ready_.clear();
    ready_head_ = 0;
    pending_error_.clear();
    for (int32_t e : experts) {
        if (e < 0 || e >= n_layer_expert)
            fail(Status::invalid_argument, "expert source: expert %d out of range for layer %d (%d experts)", e, layer,
                 n_layer_expert);
        const uint32_t key = key_of(layer, e);
        if (key_stamp_[key] == visit_)
            fail(Status::invalid_argument, "expert source: expert %d requested twice for layer %d", e, layer);
        key_stamp_[key] = visit_;
    }
    for (int32_t e : experts) {
        const uint32_t key = key_of(layer, e);
        ++usage_.counts[key];
        const KeyState st = key_state_[key];
        if (st == KeyState::resident || st == KeyState::loading) {
            const int32_t s = key_slot_[key];
            Slot &sl = slots_[size_t(s)];
            ++sl.pins;
            layer_pins_.push_back(s);
            if (sl.prefetched) ++stats_->prefetch_useful;
            sl.prefetched = false;
            sl.demoted = false;
            ++stats_->cache_hits;
            ++stats_->layer_hits[size_t(layer)];
            if (st == KeyState::resident) {
                policy_->on_hit(key, visit_);
                ready_.push_back(s);
            } else {
                sl.demand = true;
            }
        } else {
            key_state_[key] = KeyState::queued_demand;
            demand_queue_.push_back(key);
            ++stats_->cache_misses;
            ++stats_->layer_misses[size_t(layer)];
        }
    }
    // Prefetches for this layer that the router did not confirm were wrong:
    // drop the queued ones, cancel the ones in flight, evict the arrived ones first.
    for (uint32_t key : prefetched_by_layer_[size_t(layer)]) {
        awaiting_visit_[key] = 0;
        if (key_stamp_[key] == visit_) continue;
        const KeyState st = key_state_[key];
        if (st == KeyState::queued_prefetch) {
            key_state_[key] = KeyState::absent;
        } else if (st == KeyState::loading || st == KeyState::resident) {
            const int32_t s = key_slot_[key];
            Slot &sl = slots_[size_t(s)];
            if (!sl.prefetched) continue;
            sl.demoted = true;
            if (st == KeyState::resident) {
                demoted_.push_back(s);
            } else {
                for (uint64_t part = 0; part < 3; ++part) backend_->cancel((uint64_t(s) << 2) | part);
            }
        }
    }
    prefetched_by_layer_[size_t(layer)].clear();
    score_hints(layer);
    drop_far_prefetches();
    last_experts_[size_t(layer)].assign(experts.begin(), experts.end());
    pump();
    if (cfg_.prefetch_previous && uint32_t(layer) + 1 < n_layer_ && !last_experts_[size_t(layer) + 1].empty()) {
        for (int32_t e : last_experts_[size_t(layer) + 1])
            if (!enqueue_prefetch(layer + 1, e)) break;
        pump();
    }
}

void StreamingExpertSource::score_hints(int32_t layer) {
    // Called once the layer's request is stamped with visit_: a hinted key
    // carries the stamp exactly when the layer asked for it.
    constexpr float kWeight = 1.0f / 8.0f;
    constexpr float kPooledWeight = 1.0f / 16.0f;
    for (size_t d = 1; d <= kHintDistances; ++d) {
        auto &hinted = hinted_[(d - 1) * n_layer_ + size_t(layer)];
        for (const Hint &h : hinted) {
            const float right = key_stamp_[h.key] == visit_ ? 1.0f : 0.0f;
            const size_t at = hint_index(d, layer, h.rank);
            float &p = hint_precision_[at];
            p += kWeight * (right - p);
            uint8_t &n = hint_scored_[at];
            if (n < 255) ++n;
            float &pooled = rank_precision_[pooled_index(d, h.rank)];
            pooled += kPooledWeight * (right - pooled);
        }
        hinted.clear();
    }
}

void StreamingExpertSource::drop_far_prefetches() {
    // Not yet read: the running layer's lookahead replaces them with newer
    // predictions, in order of distance. Their keys stay listed under their
    // layer (awaiting_visit_ marks them), which finds them absent.
    for (size_t i = far_head_; i < far_queue_.size(); ++i)
        if (key_state_[far_queue_[i]] == KeyState::queued_prefetch) key_state_[far_queue_[i]] = KeyState::absent;
    far_queue_.clear();
    far_head_ = 0;
}

ReadyExpert StreamingExpertSource::next_ready() {
    if (returned_ > 0) poll();
    for (;;) {
        if (!pending_error_.empty()) {
            std::string message;
            message.swap(pending_error_);
            throw Error(Status::io, std::move(message));
        }
        if (ready_head_ < ready_.size()) {
            const int32_t s = ready_[ready_head_++];
            ++returned_;
            return ReadyExpert{expert_of(slots_[size_t(s)].key), view_of(s)};
        }
        if (current_layer_ < 0 || returned_ >= expected_)
            fail(Status::internal, "expert source: next_ready called with no expert outstanding");
        pump();
        if (backend_->in_flight() == 0)
            fail(Status::out_of_memory,
                 "expert cache of %u slots has no slot free for layer %d (all pinned by the running layer or in flight)",
                 n_slots_, current_layer_);
        wait_and_process();
    }
}

void StreamingExpertSource::progress() {
    // With nothing in flight, the queues are as pump() left them: only a
    // completion can free the room or the slot they wait for.
    if (backend_->in_flight() > 0) poll();
}

bool StreamingExpertSource::try_next_ready(ReadyExpert &out) {
    if (current_layer_ < 0 || returned_ >= expected_ || !pending_error_.empty()) return false;
    if (ready_head_ == ready_.size()) poll();
    if (ready_head_ == ready_.size() || !pending_error_.empty()) return false;
    const int32_t s = ready_[ready_head_++];
    ++returned_;
    out = ReadyExpert{expert_of(slots_[size_t(s)].key), view_of(s)};
    return true;
}

void StreamingExpertSource::end_layer(int32_t layer) {
    (void)layer;
    for (int32_t s : layer_pins_) {
        Slot &sl = slots_[size_t(s)];
        if (sl.pins > 0) --sl.pins;
        sl.demand = false;
    }
    layer_pins_.clear();
    for (size_t i = demand_head_; i < demand_queue_.size(); ++i)
        if (key_state_[demand_queue_[i]] == KeyState::queued_demand) key_state_[demand_queue_[i]] = KeyState::absent;
    demand_queue_.clear();
    demand_head_ = 0;
    ready_.clear();
    ready_head_ = 0;
    current_layer_ = -1;
    pending_error_.clear();
    pump();
}

bool StreamingExpertSource::enqueue_prefetch(int32_t layer, int32_t expert, bool far) {
    auto &queue = far ? far_queue_ : prefetch_queue_;
    size_t &head = far ? far_head_ : prefetch_head_;
    if (queue.size() - head >= n_slots_) return false;
    const uint32_t key = key_of(layer, expert);
    if (key_state_[key] != KeyState::absent) return true;
    key_state_[key] = KeyState::queued_prefetch;
    // A queue that is never read to its end (reads started from its front,
    // new hints at its back) would grow without bound: drop the started
    // front instead of reallocating, so a step never allocates.
    if (queue.size() == queue.capacity() && head > 0) {
        queue.erase(queue.begin(), queue.begin() + std::ptrdiff_t(head));
        head = 0;
    }
    queue.push_back(key);
    if (!awaiting_visit_[key]) prefetched_by_layer_[size_t(layer)].push_back(key);
    awaiting_visit_[key] = 1;
    return true;
}

float StreamingExpertSource::hint_read_precision(size_t distance, int32_t layer, size_t rank) const {
    constexpr uint8_t kOwnAfter = 8;  // scorings before a layer's own estimate is trusted
    const size_t at = hint_index(distance, layer, rank);
    return hint_scored_[at] >= kOwnAfter ? hint_precision_[at] : rank_precision_[pooled_index(distance, rank)];
}

void StreamingExpertSource::prefetch(int32_t layer, std::span<const int32_t> experts, int32_t distance) {
    if (layer < 0 || uint32_t(layer) >= n_layer_ || distance < 1 || size_t(distance) > kHintDistances) return;
    const size_t d = size_t(distance);
    const bool far = d > 1;
    const int32_t n_layer_expert = cfg_.layers[size_t(layer)].n_expert;
    auto &hinted = hinted_[(d - 1) * n_layer_ + size_t(layer)];
    hinted.clear();
    bool room = true;
    uint32_t rank = 0;
    for (int32_t e : experts) {
        if (e < 0 || e >= n_layer_expert) continue;
        const uint32_t key = key_of(layer, e);
        const uint32_t r = rank++;
        if (key_state_[key] == KeyState::resident || key_state_[key] == KeyState::loading) continue;  // costs nothing
        if (hinted.size() < size_t(n_expert_)) hinted.push_back(Hint{key, r});
        // A rank whose reads have mostly been wrong would only spend device
        // time and evict a cached expert; its precision keeps being measured.
        if (!room || hint_read_precision(d, layer, r) < cfg_.prefetch_min_precision) continue;
        room = enqueue_prefetch(layer, e, far);
    }
    pump();
}

void StreamingExpertSource::drain() {
    for (size_t i = prefetch_head_; i < prefetch_queue_.size(); ++i)
        if (key_state_[prefetch_queue_[i]] == KeyState::queued_prefetch)
            key_state_[prefetch_queue_[i]] = KeyState::absent;
    prefetch_queue_.clear();
    prefetch_head_ = 0;
    drop_far_prefetches();
    while (backend_->in_flight() > 0 || !retries_.empty()) {
        pump();
        if (backend_->in_flight() > 0) wait_and_process();
    }
}

std::vector<uint32_t> StreamingExpertSource::resident_keys() const {
    std::vector<uint32_t> keys;
    for (const auto &sl : slots_)
        if (sl.busy && !sl.loading) keys.push_back(sl.key);
    std::sort(keys.begin(), keys.end());
    return keys;
}

}  // namespace moe
