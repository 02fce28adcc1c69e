// The last N token ids a sampler has seen, for the repetition penalties: a
// ring allocated once at its capacity, so recording a token never allocates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace moe {

class TokenHistory {
public:
    explicit TokenHistory(size_t capacity = 0) : ring_(capacity) {}

    size_t capacity() const { return ring_.size(); }
    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }

    // Records one id; the oldest one drops out when the ring is full. A
    // history of capacity 0 keeps nothing.
    void push(int32_t id) {
        if (ring_.empty()) return;
        ring_[next_] = id;
        next_ = next_ + 1 == ring_.size() ? 0 : next_ + 1;
        if (size_ < ring_.size()) ++size_;
    }
    // Records ids in order (only the last capacity() of them remain).
    void push(std::span<const int32_t> ids) {
        for (const int32_t id : ids) push(id);
    }
    void clear() { next_ = size_ = 0; }

    // The i-th id from the oldest kept one (i < size()).
    int32_t oldest(size_t i) const {
        const size_t at = next_ + ring_.size() - size_ + i;
        return ring_[at >= ring_.size() ? at - ring_.size() : at];
    }
    template <typename Fn>
    void for_each(Fn &&fn) const {
        for (size_t i = 0; i < size_; ++i) fn(oldest(i));
    }

private:
    std::vector<int32_t> ring_;
    size_t next_ = 0;  // where the next id goes
    size_t size_ = 0;
};

}  // namespace moe
