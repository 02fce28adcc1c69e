// ExpertSource that owns an expert cache: fixed slots in one arena, filled by
// asynchronous reads (io_uring or a pread pool), O_DIRECT where the
// filesystem allows, from a packed expert file when one matches the model or
// else from the GGUF slices themselves.
//
// Ordering: demand misses are submitted as soon as begin_layer sees them, all
// at once up to the queue depth; prefetches wait in a queue of their own and
// are submitted only when no demand read is waiting. Every call comes from
// one thread (the forward pass); completions are reaped on that thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/log.hpp"
#include "common/stats.hpp"
#include "experts/cache_policy.hpp"
#include "experts/expert_source.hpp"
#include "experts/packed_file.hpp"
#include "experts/slot_arena.hpp"
#include "io/observed_backend.hpp"
#include "io/read_backend.hpp"
#include "io/read_file.hpp"

namespace moe {

struct StreamingSourceConfig {
    std::vector<ExpertLayerLayout> layers;  // index = layer; n_expert == 0 for layers without experts
    std::vector<std::string> shard_paths;   // GGUF files by shard index
    std::string packed_path;                // "" = read the GGUF slices
    uint64_t model_fingerprint = 0;         // checked against the packed file
    bool direct = true;                     // O_DIRECT when the filesystem allows it
    bool verify_checksums = false;          // check packed extents as they arrive
    uint32_t slots = 0;                     // cache capacity in experts
    CachePolicyKind policy = CachePolicyKind::lfu_decay;
    const UsageProfile *profile = nullptr;  // for pinned_hot
    uint32_t queue_depth = 64;
    io::BackendKind backend = io::BackendKind::automatic;
    // Replaces the backend made from `backend` (tests, fault injection).
    std::unique_ptr<io::ReadBackend> backend_override;
    Stats *stats = nullptr;                 // may be null
    NumaPlacement numa = NumaPlacement::local;  // where the cache's memory lives
    // Previous-token prefetch: when layer L starts, read ahead the experts
    // layer L+1 used last time that are no longer cached.
    bool prefetch_previous = false;
    // Lookahead hints (prefetch()) are read only at ranks whose measured
    // precision (hint_read_precision) is at least this: the decayed share of hinted experts that
    // were not cached when hinted (the ones a hint would read) and that the
    // layer then requested. It is measured whether the hint was read or not,
    // so a rank that becomes reliable is read again. 0 = read every hint.
    // A wrong hint costs its whole read, and when the device is the
    // bottleneck that is decode time; the device only needs enough
    // prefetches to stay busy while a layer computes, which the first ranks
    // give. On a 48-layer model routing uniformly, lookahead precision by
    // rank was 0.996 0.987 0.975 0.952 | 0.870 0.803 0.696 0.561 (top-8):
    // at 0.9 the first four are read, and wrong reads fall from ~14% of the
    // prefetched bytes (bar 0.7) to a few percent.
    float prefetch_min_precision = 0.9f;
    // Usage profile written when the source is destroyed ("" = none): the
    // routing counts of this run added to `profile`'s.
    std::string profile_save_path;
    Log log;  // a profile that cannot be saved on destruction is reported here
};

class StreamingExpertSource final : public ExpertSource {
public:
    explicit StreamingExpertSource(StreamingSourceConfig config);
    ~StreamingExpertSource() override;

    void begin_layer(int32_t layer, std::span<const int32_t> experts) override;
    ReadyExpert next_ready() override;
    // Reaps completions without waiting; a failed read is left for next_ready to report.
    bool try_next_ready(ReadyExpert &out) override;
    void progress() override;
    void end_layer(int32_t layer) override;
    // Hints from one layer ahead join the prefetch queue; hints from further
    // ahead wait in a queue of their own, served after it and rebuilt at every
    // layer from the newest predictions, so nearer layers are read first.
    void prefetch(int32_t layer, std::span<const int32_t> experts, int32_t distance = 1) override;
    void drain() override;
    io::ObservedBackend *observed_reads() const override { return observed_; }
    // Writes the usage profile now (also done on destruction). Throws moe::Error(io).
    void save_profile() const;

    uint32_t slots() const { return n_slots_; }
    uint64_t slot_bytes() const { return slot_bytes_; }
    uint64_t cache_bytes() const { return arena_.size(); }
    const char *backend_name() const { return backend_->name(); }
    // Where the cache memory lives ("node 0, huge pages").
    const std::string &cache_placement() const { return arena_.placement(); }
    bool reading_packed() const { return packed_ != nullptr; }
    // Keys resident now (tests; keys = layer * n_expert + expert).
    std::vector<uint32_t> resident_keys() const;
    // Routing counts seen so far, for the usage profile.
    const UsageProfile &usage() const { return usage_; }
    // Slot bytes needed for one expert of these layers when reading GGUF slices.
    static uint64_t slot_bytes_for(const std::vector<ExpertLayerLayout> &layers, const PackedFile *packed,
                                   bool direct);

private:
    enum class KeyState : uint8_t { absent, queued_prefetch, queued_demand, loading, resident };
    // Starts the reads of a queue from `head` while the queue depth stays
    // within depth_limit and slots can be had; false when it had to stop
    // (the queue keeps the rest), true when the queue was emptied.
    bool start_queued(std::vector<uint32_t> &queue, size_t &head, KeyState queued, uint32_t depth_limit,
                      uint32_t parts_per_expert);
    // The running layer asked for an expert whose bytes have not landed yet.
    bool demand_waiting() const { return current_layer_ >= 0 && ready_.size() < expected_; }
    struct Slot;
    // Adds the bytes a slot's reads brought in to the demand or prefetch
    // count; `discarded` (cancelled, failed) also counts them as wasted.
    void count_bytes_read(const Slot &sl, bool discarded);
    struct Slot {
        uint32_t key = 0;
        uint16_t pins = 0;
        uint8_t parts_left = 0;
        bool busy = false;         // holds a key (loading or resident)
        bool loading = false;
        bool demand = false;       // the running layer waits for it
        bool prefetched = false;   // read as a prefetch and not used yet
        bool demoted = false;      // a prefetch that turned out wrong
        bool via_prefetch = false; // the read was issued as a prefetch
        uint8_t cancelled_parts = 0;   // parts whose read was cancelled
        int error = 0;             // first errno of a failed part
        uint32_t fail_file = 0;
        uint64_t fail_offset = 0;
        std::string problem;       // non-errno failure (short read, checksum)
        uint64_t bytes = 0;        // bytes read for it
    };
    // One read of an expert: a GGUF slice widened to the alignment, or a
    // whole packed extent.
    struct Part {
        uint32_t file;        // index into files_
        uint32_t matrix;      // 0 gate, 1 up, 2 down
        uint64_t offset;      // file position (aligned)
        uint64_t length;      // bytes read (aligned)
        uint64_t slot_offset; // where the read lands in the slot
        uint64_t need;        // bytes that must arrive (skip + matrix bytes)
        uint64_t skip;        // matrix start within the read
    };

    uint32_t key_of(int32_t layer, int32_t expert) const { return uint32_t(layer) * n_expert_ + uint32_t(expert); }
    int32_t layer_of(uint32_t key) const { return int32_t(key / n_expert_); }
    int32_t expert_of(uint32_t key) const { return int32_t(key % n_expert_); }
    uint8_t *slot_data(int32_t s) const { return arena_.data() + uint64_t(s) * slot_bytes_; }
    ExpertView view_of(int32_t s) const;
    uint32_t plan_parts(uint32_t key, Part out[3]) const;

    bool enqueue_prefetch(int32_t layer, int32_t expert, bool far = false);
    void drop_far_prefetches();
    void score_hints(int32_t layer);
    // Ranks past the last tracked one share its entry; distances past the
    // last tracked one are not read.
    static size_t hint_rank(size_t rank) { return std::min<size_t>(rank, kHintRanks - 1); }
    size_t hint_index(size_t distance, int32_t layer, size_t rank) const {
        return ((distance - 1) * n_layer_ + size_t(layer)) * kHintRanks + hint_rank(rank);
    }
    static size_t pooled_index(size_t distance, size_t rank) { return (distance - 1) * kHintRanks + hint_rank(rank); }
    // What decides whether a hint is read: the layer's own precision at that
    // rank and distance once it has been scored a few times, before that the
    // rank's precision over all layers at that distance (which every layer's
    // visit updates, so it is known after a token or two instead of after a
    // dozen).
    float hint_read_precision(size_t distance, int32_t layer, size_t rank) const;
    void pump();
    int32_t acquire_slot(bool for_demand);
    void evict(int32_t s);
    void start_read(uint32_t key, int32_t s, bool demand);
    void poll();
    void wait_and_process();
    void process(const io::ReadCompletion &c);
    void finish_slot(int32_t s);
    // A prefetch the running layer waits for failed: queue a demand read of it.
    void reread_on_demand(int32_t s);
    void release_slot(int32_t s);
    static bool evictable_cb(void *ctx, uint32_t key);

    StreamingSourceConfig cfg_;
    uint32_t n_layer_ = 0;
    uint32_t n_expert_ = 1;
    uint32_t n_slots_ = 0;
    uint64_t slot_bytes_ = 0;
    uint64_t alignment_ = 1;
    std::unique_ptr<PackedFile> packed_;
    std::vector<io::ReadFile> files_;    // shards, then the packed file
    std::vector<uint32_t> file_ids_;     // by files_ index: the backend index its reads use
    SlotArena arena_;                    // before backend_: reads land here until the backend is gone
    std::unique_ptr<io::ReadBackend> backend_;
    io::ObservedBackend *observed_ = nullptr;  // = backend_, wrapping a DirectFallbackBackend over the real one
    std::unique_ptr<CachePolicy> policy_;
    Stats own_stats_;
    Stats *stats_;
    UsageProfile usage_;

    std::vector<KeyState> key_state_;
    std::vector<int32_t> key_slot_;
    std::vector<uint64_t> key_stamp_;    // begin_layer visit that requested the key
    std::vector<uint8_t> awaiting_visit_; // prefetched for a layer that has not run since
    std::vector<Slot> slots_;
    std::vector<int32_t> free_slots_;
    std::vector<int32_t> demoted_;
    std::vector<uint32_t> demand_queue_; // keys waiting for a slot / queue room
    size_t demand_head_ = 0;
    std::vector<uint32_t> prefetch_queue_;
    size_t prefetch_head_ = 0;
    std::vector<uint32_t> far_queue_;    // hints from two or more layers ahead
    size_t far_head_ = 0;
    std::vector<std::vector<uint32_t>> prefetched_by_layer_;
    // Lookahead precision per (distance, layer, rank of the hint); ranks past
    // the last share its entry.
    static constexpr size_t kHintRanks = 16;
    static constexpr size_t kHintDistances = 4;
    std::vector<float> hint_precision_;
    std::vector<uint8_t> hint_scored_;        // per (distance, layer, rank): times scored, saturating
    std::vector<float> rank_precision_;       // per (distance, rank), over all layers
    struct Hint {
        uint32_t key;
        uint32_t rank;
    };
    std::vector<std::vector<Hint>> hinted_;  // per (distance, layer), the last hint's uncached keys
    std::vector<int32_t> ready_;         // slots ready to hand out this layer
    size_t ready_head_ = 0;
    std::vector<int32_t> layer_pins_;    // slots pinned by the running layer
    std::vector<std::vector<int32_t>> last_experts_;  // per layer, the experts of its last visit
    std::vector<std::pair<int32_t, uint32_t>> retries_;  // (slot, part) to read again
    std::vector<io::ReadCompletion> completions_;
    int32_t current_layer_ = -1;
    uint32_t expected_ = 0;
    uint32_t returned_ = 0;
    uint64_t visit_ = 0;
    std::string pending_error_;
    int pending_errno_ = 0;
};

}  // namespace moe
