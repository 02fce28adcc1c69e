// splitmix64: a small, fast generator whose sequence is fixed by its seed.
// It seeds the sampler's xoshiro256** and drives the model and trace
// generators, whose outputs must be reproducible from a seed alone.
#pragma once

#include <cstdint>

namespace moe {

// Advances `state` and returns the next value.
inline uint64_t splitmix64(uint64_t &state) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

}  // namespace moe
