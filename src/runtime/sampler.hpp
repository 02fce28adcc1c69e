// Token sampling: greedy, or temperature with top-k / top-p / min-p filters,
// driven by a seeded deterministic PRNG whose state can be saved and restored.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace moe {

// xoshiro256** (Blackman & Vigna, 2018), seeded through splitmix64 so that any
// 64-bit seed, including 0, gives a valid non-zero state. Chosen because its
// output is fully specified by the published algorithm (same stream on every
// platform and compiler) and its whole state is four words.
class Xoshiro256 {
public:
    static constexpr size_t kStateWords = 4;
    using State = std::array<uint64_t, kStateWords>;

    explicit Xoshiro256(uint64_t seed = 0) { reseed(seed); }
    void reseed(uint64_t seed);
    uint64_t next();
    // Uniform double in [0, 1) from the top 53 bits.
    double next_unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

    const State &state() const { return s_; }
    // Throws invalid_argument for the all-zero state (xoshiro's one fixed point).
    void set_state(const State &s);

private:
    State s_{};
};

struct SamplerParams {
    float temperature = 0.8f;  // 0 = greedy
    int32_t top_k = 40;        // 0 = off
    float top_p = 0.95f;       // 1 = off
    float min_p = 0.05f;       // 0 = off
    uint64_t seed = 0;
};

// Throws invalid_argument naming the offending field.
void validate(const SamplerParams &params);

// Everything that decides a sampler's future tokens: its parameters and its
// generator state (what a state file's sampler section holds).
struct SamplerSnapshot {
    SamplerParams params;
    Xoshiro256::State rng{};
};

// Picks one token id from a row of logits.
//
// Greedy (temperature 0): the largest logit; ties go to the lowest id.
// Otherwise probabilities are softmax(logits / temperature) and the filters
// apply in this order: min-p keeps tokens with p >= min_p * p_max, top-k keeps
// the k most likely, top-p keeps the smallest most-likely prefix whose mass
// reaches top_p; one token is then drawn from what is left, renormalised.
// Candidates are ordered by (logit descending, id ascending) whenever an order
// matters, so a given seed and logits yield the same token sequence.
//
// NaN logits are never picked (treated as -inf). If some logit is +inf the
// lowest such id is returned. A row with no finite or +inf logit is an
// invalid_argument error.
//
// One sampler is used by one thread at a time. sample() allocates only when
// a row is larger than any row seen before (the candidate scratch grows once).
class Sampler {
public:
    // Serialised state: the PRNG words, little-endian. Parameters are not part
    // of it; they are fixed at construction.
    static constexpr size_t kStateBytes = Xoshiro256::kStateWords * 8;

    explicit Sampler(const SamplerParams &params);

    int32_t sample(std::span<const float> logits);

    const SamplerParams &params() const { return params_; }
    void save_state(std::span<uint8_t, kStateBytes> out) const;
    // Throws bad_format for a state no sampler can be in (all zero).
    void load_state(std::span<const uint8_t, kStateBytes> in);
    const Xoshiro256 &rng() const { return rng_; }

    SamplerSnapshot snapshot() const { return {params_, rng_.state()}; }
    // Becomes the sampler the snapshot was taken of. The snapshot must be
    // valid (validate() passes, the generator state is not all zero), as
    // decode_sampler_section guarantees; then this cannot fail.
    void restore(const SamplerSnapshot &snapshot);

private:
    struct Candidate {
        float logit;
        float weight;  // exp((logit - max) / temperature), in (0, 1]
        int32_t id;
    };

    int32_t sample_filtered(std::span<const float> logits, float max_logit);

    SamplerParams params_;
    Xoshiro256 rng_;
    std::vector<Candidate> scratch_;
};

}  // namespace moe
