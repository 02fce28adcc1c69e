#include "experts/cache_policy.hpp"

#include <algorithm>
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
//   otherwise                        -> its routing rate r (a decayed use
//                                       count per token) given it was not
//                                       just used: r (1 - reuse) / (1 - r);
// and the victim is the key with the lowest p. Keeping the keys most likely to
// be used next is the best a cache can do when a key's next use depends only
// on whether it was just used and on its popularity: on synthetic traces with
// that structure it is within 0.5% of the same rule fed the exact popularity
// (docs/performance.md). Where the position of the layer in the token is
// included as well (the online analogue of Belady's furthest-next-use rule),
// the hit rate does not change.
//
// Ticks are layer visits; the visits per token (the period) and the layer of a
// key come from the usage profile's shape, or the period is learned as the
// most common gap (>= 2) between uses of a key and reuse is measured over all
// layers together.
class ReuseAwarePolicy final : public CachePolicy {
public:
    ReuseAwarePolicy(uint32_t n_keys, uint32_t capacity, const UsageProfile *profile)
        : n_keys_(n_keys), last_(n_keys, kNever), score_(n_keys, -std::numeric_limits<double>::infinity()),
          resident_(n_keys, capacity), gap_histogram_(kMaxPeriod + 1, 0) {
        uint32_t n_layer = 1;
        if (profile && profile->n_layer > 0 && uint64_t(profile->n_layer) * profile->n_expert == n_keys) {
            period_ = profile->n_layer, period_known_ = true;
            n_layer = profile->n_layer;
            keys_per_layer_ = profile->n_expert;
        } else {
            keys_per_layer_ = n_keys;
        }
        layer_uses_.assign(n_layer, 0.0);
        layer_reused_.assign(n_layer, 0.0);
        layer_reuse_.assign(n_layer, kPriorReuse);
    }

    void on_insert(uint32_t key, uint64_t tick) override {
        check_key(key, n_keys_);
        use(key, tick);
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
        // Rate per token from a decayed count: count * (1 - 2^(-1/H)), corrected
        // for a history shorter than the decay window.
        const double tokens_seen = std::max(1.0, static_cast<double>(now_) / static_cast<double>(period_));
        const double per_token =
            (1.0 - std::exp2(-1.0 / kHalfLifeTokens)) / (1.0 - std::exp2(-tokens_seen / kHalfLifeTokens));
        const double now_in_half_lives = static_cast<double>(now_) / half_life_ticks();
        auto next_visit_probability = [&](uint32_t k) {
            const double reuse = layer_reuse_[layer_of(k)];
            if (now_ - last_[k] < period_) return KeepRank{reuse, last_[k]};
            const double rate = std::min(0.99, std::exp2(score_[k] - now_in_half_lives) * per_token);
            return KeepRank{rate * (1.0 - reuse) / (1.0 - rate), last_[k]};
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

    double half_life_ticks() const { return kHalfLifeTokens * static_cast<double>(period_); }
    uint32_t layer_of(uint32_t key) const { return key / keys_per_layer_; }

    void use(uint32_t key, uint64_t tick) {
        now_ = std::max(now_, tick);
        if (last_[key] == tick) return;  // one use per layer visit (a prefetch, then the demand)
        bool reused = false;
        if (last_[key] != kNever && tick > last_[key]) {
            const uint64_t gap = tick - last_[key];
            if (!period_known_ && gap >= 2 && gap <= kMaxPeriod && ++gap_histogram_[gap] > gap_histogram_[period_])
                period_ = static_cast<uint32_t>(gap);
            reused = gap == period_;
        }
        count_reuse(layer_of(key), reused);
        // Decayed count in the log domain (see LfuDecayPolicy): score = log2(count) + tick / H.
        const double t = static_cast<double>(tick) / half_life_ticks();
        score_[key] = std::log2(std::exp2(score_[key] - t) + 1.0) + t;
        last_[key] = tick;
    }
    void count_reuse(uint32_t layer, bool reused) {
        uses_ += 1, reused_ += reused;
        layer_uses_[layer] += 1, layer_reused_[layer] += reused;
        const double all_layers = (reused_ + 10.0 * kPriorReuse) / (uses_ + 10.0);
        layer_reuse_[layer] = (layer_reused_[layer] + kLayerPriorUses * all_layers) / (layer_uses_[layer] + kLayerPriorUses);
    }

    uint32_t n_keys_;
    uint32_t keys_per_layer_;
    std::vector<uint64_t> last_;
    std::vector<double> score_;
    ResidentKeys resident_;
    std::vector<uint32_t> gap_histogram_;
    std::vector<double> layer_uses_, layer_reused_, layer_reuse_;
    std::vector<uint32_t> no_pins_;
    uint32_t period_ = 1;
    bool period_known_ = false;
    uint64_t now_ = 0;
    double uses_ = 0, reused_ = 0;
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
