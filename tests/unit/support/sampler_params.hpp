// Sampler parameters the sampler tests build on, and the check that a
// sampler refuses parameters naming the field at fault.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "runtime/sampler.hpp"
#include "support/status_of.hpp"

namespace moe::test {

// Temperature sampling with top-k, top-p and min-p off, so that every token
// with a finite logit can be drawn; the penalties at their defaults (off).
inline SamplerParams unfiltered(float temperature, uint64_t seed = 1) {
    SamplerParams p;
    p.temperature = temperature;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    return p;
}

// Constructing a sampler from p fails with invalid_argument, its message
// naming `field`.
inline void expect_invalid_params(const SamplerParams &p, const char *field) {
    std::string msg;
    EXPECT_EQ(status_of([&] { Sampler s(p); }, &msg), Status::invalid_argument) << field << " accepted";
    EXPECT_NE(msg.find(field), std::string::npos) << msg;
}

}  // namespace moe::test
