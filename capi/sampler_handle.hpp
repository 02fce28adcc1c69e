// The object behind a moestream_sampler handle, shared by the capi/ files
// that take a sampler.
#pragma once

#include <atomic>

#include "common/error.hpp"
#include "runtime/sampler.hpp"

struct moestream_sampler {
    explicit moestream_sampler(const moe::SamplerParams &p) : sampler(p) {}
    moe::Sampler sampler;
    // Set while a call is inside the sampler: a second thread gets BUSY
    // instead of racing on the PRNG and the scratch buffer.
    std::atomic_flag in_use = ATOMIC_FLAG_INIT;
};

namespace moe::capi {

// Claims a sampler for the duration of one call; throws busy when another
// thread holds it and invalid_argument on NULL.
class SamplerUse {
public:
    explicit SamplerUse(const moestream_sampler *s) : s_(const_cast<moestream_sampler *>(s)) {
        if (!s_) moe::fail(moe::Status::invalid_argument, "sampler is NULL");
        if (s_->in_use.test_and_set(std::memory_order_acquire))
            moe::fail(moe::Status::busy, "sampler is in use by another thread");
    }
    ~SamplerUse() { s_->in_use.clear(std::memory_order_release); }
    SamplerUse(const SamplerUse &) = delete;
    SamplerUse &operator=(const SamplerUse &) = delete;
    moe::Sampler &operator*() const { return s_->sampler; }
    moe::Sampler *operator->() const { return &s_->sampler; }

private:
    moestream_sampler *s_;
};

}  // namespace moe::capi
