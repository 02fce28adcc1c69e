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
          pos_(n_keys, kNone), is_pinned_(n_keys, 0) {
        resident_.reserve(capacity);
        // A key's popularity is remembered over a window of about two full
        // sweeps of the key space, long enough to separate hot from cold
        // experts, short enough to follow a change of topic.
        half_life_ = std::max<double>(64.0, 2.0 * n_keys);
    }

    void on_insert(uint32_t key, uint64_t) override {
        check_key(key, n_keys_);
        touch(key);
        if (pos_[key] == kNone) {
            pos_[key] = static_cast<uint32_t>(resident_.size());
            resident_.push_back(key);
        }
    }
    void on_hit(uint32_t key, uint64_t) override {
        check_key(key, n_keys_);
        touch(key);
    }
    void on_remove(uint32_t key) override {
        check_key(key, n_keys_);
        const uint32_t p = pos_[key];
        if (p == kNone) return;
        const uint32_t moved = resident_.back();
        resident_[p] = moved;
        pos_[moved] = p;
        resident_.pop_back();
        pos_[key] = kNone;
    }
    bool choose_victim(bool (*evictable)(void *, uint32_t), void *ctx, uint32_t *out) override {
        uint32_t best = kNone;
        for (uint32_t k : resident_) {
            if (is_pinned_[k] || !evictable(ctx, k)) continue;
            if (best == kNone || score_[k] < score_[best] ||
                (score_[k] == score_[best] && last_[k] < last_[best]))
                best = k;
        }
        if (best == kNone) return false;
        *out = best;
        return true;
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
    std::vector<uint32_t> pos_;
    std::vector<uint32_t> resident_;
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
// models) and a few experts per layer are popular. Each resident key gets the
// probability p of being used at its layer's next visit:
//   used at its layer's latest visit -> the measured reuse rate;
//   otherwise                        -> its routing rate r (a decayed use
//                                       count) given it was not just used:
//                                       r (1 - reuse) / (1 - r);
// and the victim is the key with the longest expected wait until its next
// use: ticks to its layer's next visit plus period * (1 - p) / p, the online
// analogue of Belady's furthest-next-use rule. Ticks are layer visits; the
// visits per token (the period) come from the usage profile's shape, or are
// learned as the most common gap (>= 2) between uses of a key.
class ReuseAwarePolicy final : public CachePolicy {
public:
    ReuseAwarePolicy(uint32_t n_keys, uint32_t capacity, const UsageProfile *profile)
        : n_keys_(n_keys), last_(n_keys, kNever), count_(n_keys, 0.0), stamp_(n_keys, 0), pos_(n_keys, kNone),
          gap_histogram_(kMaxPeriod + 1, 0) {
        resident_.reserve(capacity);
        if (profile && profile->n_layer > 0 && uint64_t(profile->n_layer) * profile->n_expert == n_keys)
            period_ = profile->n_layer, period_known_ = true;
    }

    void on_insert(uint32_t key, uint64_t tick) override {
        check_key(key, n_keys_);
        use(key, tick);
        if (pos_[key] == kNone) {
            pos_[key] = static_cast<uint32_t>(resident_.size());
            resident_.push_back(key);
        }
    }
    void on_hit(uint32_t key, uint64_t tick) override {
        check_key(key, n_keys_);
        use(key, tick);
    }
    void on_remove(uint32_t key) override {
        check_key(key, n_keys_);
        const uint32_t p = pos_[key];
        if (p == kNone) return;
        const uint32_t moved = resident_.back();
        resident_[p] = moved;
        pos_[moved] = p;
        resident_.pop_back();
        pos_[key] = kNone;
    }
    bool choose_victim(bool (*evictable)(void *, uint32_t), void *ctx, uint32_t *out) override {
        const double period = static_cast<double>(period_);
        const double reuse = (reused_ + 4.0) / (uses_ + 10.0);  // prior 0.4
        // Rate per token from a decayed count: count * (1 - 2^(-1/H)), corrected
        // for a history shorter than the decay window.
        const double tokens_seen = std::max(1.0, static_cast<double>(now_) / period);
        const double per_token = (1.0 - std::exp2(-1.0 / kHalfLifeTokens)) / (1.0 - std::exp2(-tokens_seen / kHalfLifeTokens));
        uint32_t best = kNone;
        double best_wait = 0;
        for (uint32_t k : resident_) {
            if (!evictable(ctx, k)) continue;
            const double rate = std::min(0.99, decayed(k, now_) * per_token);
            const double since = static_cast<double>(now_ - last_[k]);
            // Probability of use at the layer's next visit.
            double p = since < period ? reuse : rate * (1.0 - reuse) / (1.0 - rate);
            p = std::max(p, 1e-6);
            // Expected ticks until the next use: to the layer's next visit, then
            // a geometric number of further tokens.
            const double to_visit = period - std::fmod(since, period);
            const double wait = to_visit + period * (1.0 - p) / p;
            if (best == kNone || wait > best_wait || (wait == best_wait && last_[k] < last_[best])) {
                best = k;
                best_wait = wait;
            }
        }
        if (best == kNone) return false;
        *out = best;
        return true;
    }
    const std::vector<uint32_t> &pinned() const override { return no_pins_; }

private:
    static constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();
    static constexpr uint32_t kMaxPeriod = 4096;
    // Long enough to rank experts by popularity reliably (a rare expert is
    // routed a few times per thousand tokens), short enough to follow a topic.
    static constexpr double kHalfLifeTokens = 1024.0;

    double half_life_ticks() const { return kHalfLifeTokens * static_cast<double>(period_); }

    void use(uint32_t key, uint64_t tick) {
        now_ = std::max(now_, tick);
        if (last_[key] == tick) return;  // one use per layer visit (a prefetch, then the demand)
        ++uses_;
        if (last_[key] != kNever && tick > last_[key]) {
            const uint64_t gap = tick - last_[key];
            if (!period_known_ && gap >= 2 && gap <= kMaxPeriod && ++gap_histogram_[gap] > gap_histogram_[period_])
                period_ = static_cast<uint32_t>(gap);
            if (gap == period_) ++reused_;
        }
        count_[key] = decayed(key, tick) + 1.0;
        stamp_[key] = tick;
        last_[key] = tick;
    }
    // The key's use count decayed to `tick` (halves every kHalfLifeTokens tokens).
    double decayed(uint32_t key, uint64_t tick) const {
        return count_[key] * std::exp2(-static_cast<double>(tick - stamp_[key]) / half_life_ticks());
    }

    uint32_t n_keys_;
    std::vector<uint64_t> last_;
    std::vector<double> count_;
    std::vector<uint64_t> stamp_;
    std::vector<uint32_t> pos_;
    std::vector<uint32_t> resident_;
    std::vector<uint32_t> gap_histogram_;
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
