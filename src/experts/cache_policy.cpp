#include "experts/cache_policy.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/error.hpp"

namespace moe {

const char *cache_policy_name(CachePolicyKind kind) {
    switch (kind) {
    case CachePolicyKind::lru: return "lru";
    case CachePolicyKind::lfu_decay: return "lfu-decay";
    case CachePolicyKind::pinned_hot: return "pinned-hot";
    case CachePolicyKind::reuse_aware: return "reuse-aware";
    }
    return "?";
}

CachePolicyKind parse_cache_policy(const std::string &name) {
    if (name == "lru") return CachePolicyKind::lru;
    if (name == "lfu" || name == "lfu-decay") return CachePolicyKind::lfu_decay;
    if (name == "pinned" || name == "pinned-hot") return CachePolicyKind::pinned_hot;
    if (name == "reuse" || name == "reuse-aware") return CachePolicyKind::reuse_aware;
    fail(Status::invalid_argument, "unknown cache policy '%s' (expected lru, lfu-decay or pinned-hot)",
         name.c_str());
}

namespace {

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

void check_key(uint32_t key, uint32_t n_keys) {
    if (key >= n_keys) fail(Status::internal, "cache policy: key %u out of range (%u keys)", key, n_keys);
}

// Least recently used: an intrusive doubly linked list over all keys (no
// allocation after construction). Head = most recent.
class LruPolicy final : public CachePolicy {
public:
    explicit LruPolicy(uint32_t n_keys) : n_keys_(n_keys), prev_(n_keys, kNone), next_(n_keys, kNone), in_(n_keys, 0) {}

    void on_insert(uint32_t key, uint64_t) override {
        check_key(key, n_keys_);
        if (in_[key]) unlink(key);
        push_front(key);
    }
    void on_hit(uint32_t key, uint64_t) override {
        check_key(key, n_keys_);
        if (in_[key]) unlink(key);
        push_front(key);
    }
    void on_remove(uint32_t key) override {
        check_key(key, n_keys_);
        if (in_[key]) unlink(key);
    }
    bool choose_victim(bool (*evictable)(void *, uint32_t), void *ctx, uint32_t *out) override {
        for (uint32_t k = tail_; k != kNone; k = prev_[k]) {
            if (evictable(ctx, k)) {
                *out = k;
                return true;
            }
        }
        return false;
    }
    const std::vector<uint32_t> &pinned() const override { return no_pins_; }

private:
    void push_front(uint32_t k) {
        prev_[k] = kNone;
        next_[k] = head_;
        if (head_ != kNone) prev_[head_] = k;
        head_ = k;
        if (tail_ == kNone) tail_ = k;
        in_[k] = 1;
    }
    void unlink(uint32_t k) {
        if (prev_[k] != kNone) next_[prev_[k]] = next_[k]; else head_ = next_[k];
        if (next_[k] != kNone) prev_[next_[k]] = prev_[k]; else tail_ = prev_[k];
        prev_[k] = next_[k] = kNone;
        in_[k] = 0;
    }

    uint32_t n_keys_;
    std::vector<uint32_t> prev_, next_;
    std::vector<uint8_t> in_;
    uint32_t head_ = kNone, tail_ = kNone;
    std::vector<uint32_t> no_pins_;
};

// The resident keys of a policy as a dense list (swap-removal keeps it dense),
// so a victim scan touches only the cache's slots, never the whole key space.
class ResidentKeys {
public:
    ResidentKeys(uint32_t n_keys, uint32_t capacity) : pos_(n_keys, kNone) { keys_.reserve(capacity); }

    void add(uint32_t key) {
        if (pos_[key] != kNone) return;
        pos_[key] = static_cast<uint32_t>(keys_.size());
        keys_.push_back(key);
    }
    void remove(uint32_t key) {
        const uint32_t p = pos_[key];
        if (p == kNone) return;
        const uint32_t moved = keys_.back();
        keys_[p] = moved;
        pos_[moved] = p;
        keys_.pop_back();
        pos_[key] = kNone;
    }
    const std::vector<uint32_t> &keys() const { return keys_; }

private:
    std::vector<uint32_t> pos_;
    std::vector<uint32_t> keys_;
};

// How strongly a policy wants to keep a key: the lowest rank is evicted first,
// ties go to the key used longest ago.
struct KeepRank {
    double value;
    uint64_t last_use;
    bool below(const KeepRank &o) const { return value < o.value || (value == o.value && last_use < o.last_use); }
};

// The one victim scan every ranking policy shares: the lowest-ranked resident
// key the cache lets go (`skip` excludes keys the policy itself protects).
// O(resident keys), no allocation.
template <class Rank, class Skip>
bool pick_lowest(const ResidentKeys &resident, bool (*evictable)(void *, uint32_t), void *ctx, Rank rank, Skip skip,
                 uint32_t *out) {
    uint32_t best = kNone;
    KeepRank best_rank{0, 0};
    for (uint32_t k : resident.keys()) {
        if (skip(k) || !evictable(ctx, k)) continue;
        const KeepRank r = rank(k);
        if (best == kNone || r.below(best_rank)) best = k, best_rank = r;
    }
    if (best == kNone) return false;
    *out = best;
    return true;
}

// Frequency-weighted recency with exponential decay. Each key carries a use
// count that halves every `half_life` events; the victim is the resident key
// with the smallest decayed count (ties: least recently used). Counts survive
// eviction so a popular expert that was pushed out comes back strong.
//
// The decayed count f(t) = f(last) * 2^-((t - last) / H) is compared in the
// log domain: log2 f(t) = score - t / H with score = log2 f(last) + last / H,
// so every key's rank can be compared through `score` alone, without touching
// all keys at every event.
class LfuDecayPolicy : public CachePolicy {
public:
    LfuDecayPolicy(uint32_t n_keys, uint32_t capacity)
        : n_keys_(n_keys), score_(n_keys, -std::numeric_limits<double>::infinity()), last_(n_keys, 0),
          resident_(n_keys, capacity), is_pinned_(n_keys, 0) {
        // A key's popularity is remembered over a window of about two full
        // sweeps of the key space, long enough to separate hot from cold
        // experts, short enough to follow a change of topic.
        half_life_ = std::max<double>(64.0, 2.0 * n_keys);
    }

    void on_insert(uint32_t key, uint64_t) override {
        check_key(key, n_keys_);
        touch(key);
        resident_.add(key);
    }
    void on_hit(uint32_t key, uint64_t) override {
        check_key(key, n_keys_);
        touch(key);
    }
    void on_remove(uint32_t key) override {
        check_key(key, n_keys_);
        resident_.remove(key);
    }
    bool choose_victim(bool (*evictable)(void *, uint32_t), void *ctx, uint32_t *out) override {
        return pick_lowest(
            resident_, evictable, ctx, [&](uint32_t k) { return KeepRank{score_[k], last_[k]}; },
            [&](uint32_t k) { return is_pinned_[k] != 0; }, out);
    }
    const std::vector<uint32_t> &pinned() const override { return pinned_; }

protected:
    void touch(uint32_t key) {
        const uint64_t now = ++clock_;
        const double f_old = std::exp2(score_[key] - static_cast<double>(now) / half_life_);
        score_[key] = std::log2(f_old + 1.0) + static_cast<double>(now) / half_life_;
        last_[key] = now;
    }

    uint32_t n_keys_;
    double half_life_;
    uint64_t clock_ = 0;
    std::vector<double> score_;
    std::vector<uint64_t> last_;
    ResidentKeys resident_;
    std::vector<uint8_t> is_pinned_;
    std::vector<uint32_t> pinned_;
};

// The hottest keys of a usage profile are kept permanently (up to half the
// slots, so the other half still follows the current text); the rest of the
// cache is LFU with decay. Without a profile it is plain LFU with decay.
class PinnedHotPolicy final : public LfuDecayPolicy {
public:
    PinnedHotPolicy(uint32_t n_keys, uint32_t capacity, const UsageProfile *profile)
        : LfuDecayPolicy(n_keys, capacity) {
        if (!profile || profile->counts.size() != n_keys) return;
        std::vector<uint32_t> order(n_keys);
        std::iota(order.begin(), order.end(), 0u);
        const auto &c = profile->counts;
        std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return c[a] > c[b]; });
        const uint32_t limit = capacity / 2;
        for (uint32_t k : order) {
            if (pinned_.size() >= limit || c[k] == 0) break;
            pinned_.push_back(k);
            is_pinned_[k] = 1;
        }
    }
};

// Reuse-aware frequency policy. Routing has two kinds of locality: a token
// reuses a share of its predecessor's experts in the same layer (~40% in real
// models, varying by layer) and a few experts per layer are popular. Each
// resident key gets the probability p of being used at its layer's next visit:
//   used at its layer's latest visit -> that layer's measured reuse rate;
//   otherwise                        -> its fresh-draw rate: the visits of its
//                                       layer that used it without the visit
//                                       before having used it, over the
//                                       visits that did not follow a use
//                                       (both decayed counts);
// and the victim is the key with the lowest p. Real routing also comes back
// to experts a few tokens later more often than popularity says (a topic
// holds several tokens; the published LRU hit rates of real models rise with
// the cache faster than one-token reuse explains), so when the layer shape is
// known a key not used at the latest visit has its fresh-draw rate scaled by
// how much more (or less) often than their fresh-draw rates predict the layer
// uses keys of its recency class (its next visit 2, 3, ..., 33 or more visits
// after its last use), measured per layer against the class over
// all layers. On order-1 routing every class uses what the rates predict and
// the factor is 1.
// Counting fresh draws on their
// own measures exactly the chance that matters for a key that was not just
// used; a rate over all uses mixes in the length of reuse runs, which only
// adds noise (0.2-0.4% of Belady more at the synth defaults). Keeping the keys
// most likely to be used next is the best a cache can do when a key's next
// use depends only on whether it was just used and on its popularity: on
// synthetic traces with that structure it is within 1% of the same rule fed
// the true popularity, and an online policy cannot see more than that rule
// (docs/performance.md). Ranking by the layer's position in the token as
// well (the online analogue of Belady's furthest-next-use rule) does not
// change the hit rate.
//
// Ticks are layer visits; the visits per token (the period) and the layer of a
// key come from the usage profile's shape, or the period is learned as the
// most common gap (>= 2) between uses of a key and reuse is measured over all
// layers together.
//
// Decayed counts are kept in linear form against a shared epoch: an event at
// tick t adds 2^((t - epoch) / H), so all keys' counts decay together and a
// victim scan compares ratios of them without an exp2 per key; the epoch
// moves forward (one pass over the keys) every kRebaseHalfLives.
class ReuseAwarePolicy final : public CachePolicy {
public:
    ReuseAwarePolicy(uint32_t n_keys, uint32_t capacity, const UsageProfile *profile)
        : n_keys_(n_keys), last_(n_keys, kNever), prefetched_at_(n_keys, kNever), uses_(n_keys, 0.0), fresh_(n_keys, 0.0),
          resident_(n_keys, capacity), gap_histogram_(kMaxPeriod + 1, 0) {
        uint32_t n_layer = 1;
        if (profile && profile->n_layer > 0 && uint64_t(profile->n_layer) * profile->n_expert == n_keys) {
            period_ = profile->n_layer, period_known_ = true;
            n_layer = profile->n_layer;
            keys_per_layer_ = profile->n_expert;
        } else {
            keys_per_layer_ = n_keys;
        }
        layer_ran_at_.assign(n_layer, 0);
        layer_uses_.assign(n_layer, 0.0);
        layer_reused_.assign(n_layer, 0.0);
        layer_reuse_.assign(n_layer, kPriorReuse);
        if (period_known_) {
            counted_visit_.assign(n_layer, kNever);
            class_expected_.assign(size_t(n_layer) * kRecallClasses, 0.0);
            class_uses_.assign(size_t(n_layer) * kRecallClasses, 0.0);
        }
    }

    void on_insert(uint32_t key, uint64_t tick) override {
        check_key(key, n_keys_);
        use(key, tick);
        resident_.add(key);
    }
    // A read-ahead is resident but not used: counting it would make a wrong
    // hint look popular, and a hinted reuse would look like two fresh draws.
    // It is kept until its layer has run (the source evicts a read-ahead the
    // layer did not ask for before anything else).
    void on_prefetch(uint32_t key, uint64_t tick) override {
        check_key(key, n_keys_);
        now_ = std::max(now_, tick);
        prefetched_at_[key] = tick;
        resident_.add(key);
    }
    void on_hit(uint32_t key, uint64_t tick) override {
        check_key(key, n_keys_);
        use(key, tick);
    }
    void on_remove(uint32_t key) override {
        check_key(key, n_keys_);
        resident_.remove(key);
    }
    bool choose_victim(bool (*evictable)(void *, uint32_t), void *ctx, uint32_t *out) override {
        const FreshRates fresh_rates(*this, now_);
        const double recall_prior = kRecallPriorUses * weight_of(now_);
        auto next_visit_probability = [&](uint32_t k) {
            if (prefetched_at_[k] != kNever && layer_ran_at_[layer_of(k)] <= prefetched_at_[k])
                return KeepRank{1.0, prefetched_at_[k]};  // its layer has not run since the read-ahead
            if (now_ - last_[k] < period_) return KeepRank{layer_reuse_[layer_of(k)], last_[k]};
            const double fresh = fresh_rates.of(k);
            if (!period_known_) return KeepRank{fresh, last_[k]};
            const uint64_t visits_since_use_at_next = (now_ - last_[k]) / period_ + 1;
            return KeepRank{std::min(1.0, fresh * recall_factor(layer_of(k), visits_since_use_at_next, recall_prior)),
                            last_[k]};
        };
        return pick_lowest(resident_, evictable, ctx, next_visit_probability, [](uint32_t) { return false; }, out);
    }
    const std::vector<uint32_t> &pinned() const override { return no_pins_; }

private:
    static constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();
    static constexpr uint32_t kMaxPeriod = 4096;
    static constexpr double kPriorReuse = 0.4;
    // Uses a layer's own reuse count is worth against the all-layer rate, so
    // a layer starts from the common rate and moves away only on evidence.
    static constexpr double kLayerPriorUses = 64.0;
    // Long enough to rank experts by popularity reliably (a rare expert is
    // routed a few times per thousand tokens), short enough to follow a topic.
    static constexpr double kHalfLifeTokens = 1024.0;
    static constexpr double kPriorVisits = 2.0;
    static constexpr double kRebaseHalfLives = 256.0;
    // Recency classes of a key not used at its layer's latest visit, by the
    // visits from its last use to the next visit: 2, 3, ..., 33, more (or
    // never used). Single visits, not ranges: a topic's experts come back
    // within some tokens and then stop, and a range across that edge blurs it.
    static constexpr uint32_t kRecallClasses = 33;
    // Uses a class's own count is worth against the class over all layers,
    // and that against no difference from the fresh-draw rates.
    static constexpr double kRecallPriorUses = 64.0;

    // Each key's fresh-draw rate at `now`: uses not following a use over the
    // visits that did not follow one (decayed), starting from the average.
    class FreshRates {
    public:
        FreshRates(const ReuseAwarePolicy &p, uint64_t now) : p_(p) {
            // Visits of a layer so far, decayed, in the epoch's units: sum over
            // tokens i of 2^((now - i * period - epoch) / H).
            const double tokens_seen = std::max(1.0, static_cast<double>(now) / static_cast<double>(p.period_));
            const double h_tokens = kHalfLifeTokens;
            visits_ = (1.0 - std::exp2(-tokens_seen / h_tokens)) / (1.0 - std::exp2(-1.0 / h_tokens)) * p.weight_of(now);
            // A key with few visits off reuse starts from the average fresh-draw
            // rate, worth kPriorVisits visits.
            prior_visits_ = kPriorVisits * p.weight_of(now);
            const double off_reuse_all = visits_ * static_cast<double>(p.n_keys_) - p.total_uses_;
            mean_fresh_ = off_reuse_all > 0 ? std::min(1.0, p.total_fresh_ / off_reuse_all) : 0.0;
        }
        double of(uint32_t k) const {
            const double off_reuse = std::max(0.0, visits_ - p_.uses_[k]);
            return (p_.fresh_[k] + prior_visits_ * mean_fresh_) / (off_reuse + prior_visits_);
        }

    private:
        const ReuseAwarePolicy &p_;
        double visits_, prior_visits_, mean_fresh_;
    };

    static uint32_t recall_class(uint64_t visits_since_use) {
        if (visits_since_use > 33) return kRecallClasses - 1;
        return static_cast<uint32_t>(visits_since_use - 2);
    }
    // How much more often than their fresh-draw rates say the layer uses keys
    // of this recency class (uses over expected uses); 1 without evidence.
    // Measured against the keys' own rates, not the layer's average, because
    // the keys left unused longest are the unpopular ones: a class factor
    // must not count popularity a second time.
    double recall_factor(uint32_t layer, uint64_t visits_since_use, double prior) const {
        const uint32_t c = recall_class(visits_since_use);
        const double all_layers = (class_uses_all_[c] + prior) / (class_expected_all_[c] + prior);
        const size_t i = size_t(layer) * kRecallClasses + c;
        return (class_uses_[i] + prior * all_layers) / (class_expected_[i] + prior);
    }
    // At the first use of a layer visit (before any key of it is marked used):
    // every key of the layer not used at the previous visit adds its fresh-draw
    // rate to the uses its class is expected to have.
    void count_visit(uint32_t layer, uint64_t tick) {
        counted_visit_[layer] = tick;
        const FreshRates fresh_rates(*this, tick);
        const double w = weight_of(tick);
        const uint32_t first = layer * keys_per_layer_;
        for (uint32_t k = first; k < first + keys_per_layer_; ++k) {
            const uint64_t since = last_[k] == kNever ? kNever : visits_between(last_[k], tick);
            if (since < 2) continue;
            const double expected = w * fresh_rates.of(k);
            class_expected_[size_t(layer) * kRecallClasses + recall_class(since)] += expected;
            class_expected_all_[recall_class(since)] += expected;
        }
    }
    // Layer visits from one tick to a later one (ticks of one layer are a period apart).
    uint64_t visits_between(uint64_t from, uint64_t to) const { return (to - from + period_ / 2) / period_; }

    double half_life_ticks() const { return kHalfLifeTokens * static_cast<double>(period_); }
    uint32_t layer_of(uint32_t key) const { return key / keys_per_layer_; }
    // Weight of an event at `tick` relative to the epoch.
    double weight_of(uint64_t tick) const {
        return std::exp2((static_cast<double>(tick) - static_cast<double>(epoch_)) / half_life_ticks());
    }

    void use(uint32_t key, uint64_t tick) {
        now_ = std::max(now_, tick);
        prefetched_at_[key] = kNever;
        const uint32_t layer = layer_of(key);
        layer_ran_at_[layer] = std::max(layer_ran_at_[layer], tick);
        if (period_known_ && counted_visit_[layer] != tick) count_visit(layer, tick);
        if (last_[key] == tick) return;  // one use per layer visit
        if (period_known_) {
            const uint64_t since = last_[key] == kNever ? kNever : visits_between(last_[key], tick);
            if (since >= 2) {
                const double w = weight_of(tick);
                class_uses_[size_t(layer) * kRecallClasses + recall_class(since)] += w;
                class_uses_all_[recall_class(since)] += w;
            }
        }
        bool reused = false;
        if (last_[key] != kNever && tick > last_[key]) {
            const uint64_t gap = tick - last_[key];
            if (!period_known_ && gap >= 2 && gap <= kMaxPeriod && ++gap_histogram_[gap] > gap_histogram_[period_]) {
                rebase(now_);  // the half-life in ticks changes with the period
                period_ = static_cast<uint32_t>(gap);
            }
            reused = gap == period_;
        }
        count_reuse(layer_of(key), reused);
        if (static_cast<double>(tick - std::min(tick, epoch_)) > kRebaseHalfLives * half_life_ticks()) rebase(tick);
        const double w = weight_of(tick);
        uses_[key] += w, total_uses_ += w;
        if (!reused) fresh_[key] += w, total_fresh_ += w;
        last_[key] = tick;
    }
    void rebase(uint64_t tick) {
        const double scale = 1.0 / weight_of(tick);
        for (double &u : uses_) u *= scale;
        for (double &f : fresh_) f *= scale;
        for (auto *counts : {&class_expected_, &class_uses_}) for (double &c : *counts) c *= scale;
        for (auto *counts : {&class_expected_all_, &class_uses_all_}) for (double &c : *counts) c *= scale;
        total_uses_ *= scale, total_fresh_ *= scale;
        epoch_ = tick;
    }
    void count_reuse(uint32_t layer, bool reused) {
        reuse_uses_ += 1, reused_ += reused;
        layer_uses_[layer] += 1, layer_reused_[layer] += reused;
        const double all_layers = (reused_ + 10.0 * kPriorReuse) / (reuse_uses_ + 10.0);
        layer_reuse_[layer] = (layer_reused_[layer] + kLayerPriorUses * all_layers) / (layer_uses_[layer] + kLayerPriorUses);
    }

    uint32_t n_keys_;
    uint32_t keys_per_layer_;
    std::vector<uint64_t> last_;
    std::vector<uint64_t> prefetched_at_;  // tick of a read-ahead not used since
    std::vector<double> uses_, fresh_;  // decayed counts in the epoch's units
    double total_uses_ = 0, total_fresh_ = 0;
    uint64_t epoch_ = 0;
    ResidentKeys resident_;
    std::vector<uint32_t> gap_histogram_;
    std::vector<double> layer_uses_, layer_reused_, layer_reuse_;
    std::vector<uint64_t> layer_ran_at_;  // latest tick a key of the layer was used
    // Recency classes, per layer (only with a known shape): decayed uses of
    // keys of each class and the uses their fresh-draw rates expected.
    std::vector<uint64_t> counted_visit_;
    std::vector<double> class_expected_, class_uses_;
    std::array<double, kRecallClasses> class_expected_all_{}, class_uses_all_{};  // over all layers
    std::vector<uint32_t> no_pins_;
    uint32_t period_ = 1;
    bool period_known_ = false;
    uint64_t now_ = 0;
    double reuse_uses_ = 0, reused_ = 0;
};

}  // namespace

std::unique_ptr<CachePolicy> make_cache_policy(CachePolicyKind kind, uint32_t n_keys, uint32_t capacity,
                                               const UsageProfile *profile) {
    if (n_keys == 0) fail(Status::invalid_argument, "cache policy needs at least one key");
    switch (kind) {
    case CachePolicyKind::lru: return std::make_unique<LruPolicy>(n_keys);
    case CachePolicyKind::lfu_decay: return std::make_unique<LfuDecayPolicy>(n_keys, capacity);
    case CachePolicyKind::pinned_hot: return std::make_unique<PinnedHotPolicy>(n_keys, capacity, profile);
    case CachePolicyKind::reuse_aware: return std::make_unique<ReuseAwarePolicy>(n_keys, capacity, profile);
    }
    fail(Status::invalid_argument, "unknown cache policy kind %d", static_cast<int>(kind));
}

}  // namespace moe
