// Token sampling: greedy, or temperature with top-k / top-p / min-p filters,
// driven by a seeded deterministic PRNG whose state can be saved and restored,
// after optional repetition penalties over the most recent tokens.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/token_history.hpp"

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
    // Repetition penalties over the last penalty_last_n tokens (see Sampler).
    float repeat_penalty = 1.0f;     // > 0; 1 = off, below 1 favours seen tokens
    float presence_penalty = 0.0f;   // 0 = off; negative favours seen tokens
    float frequency_penalty = 0.0f;  // 0 = off; negative favours seen tokens
    int32_t penalty_last_n = 64;     // 0 = no window (penalties off); kPenaltyWholeHistory = all

    bool penalties_on() const {
        return penalty_last_n != 0 && (repeat_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f);
    }
    // How many of the most recent tokens the penalties count: the history's
    // capacity. For validated parameters.
    size_t penalty_window() const;
};

// The largest penalty window: far beyond any use, while its ring (4 bytes a
// token) and the state file's sampler section stay small.
inline constexpr int32_t kMaxPenaltyLastN = 1 << 16;
// penalty_last_n for every token since construction or reset(): the whole
// context, when the sampler is fed the prompt and reset with its context.
// The sampler does not know the context's length, so its ring holds the
// largest window (kMaxPenaltyLastN ids, allocated at construction); a longer
// context has its last kMaxPenaltyLastN tokens counted.
inline constexpr int32_t kPenaltyWholeHistory = -1;

// Throws invalid_argument naming the offending field.
void validate(const SamplerParams &params);

// Everything that decides a sampler's future tokens: its parameters, its
// generator state and its token history (what a state file's sampler section
// holds). The history's capacity is params.penalty_window().
struct SamplerSnapshot {
    SamplerParams params;
    Xoshiro256::State rng{};
    TokenHistory history;
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
// Repetition penalties come first, on a copy of the row, for each distinct id
// among the last penalty_window() tokens of the history (drawn by sample() or
// fed by accept()) that is below the row's length, seen c times there:
//     l = l > 0 ? l / repeat_penalty : l * repeat_penalty
//     l = l - (float(c) * frequency_penalty + presence_penalty)
// in float arithmetic. repeat_penalty > 0 keeps each logit's sign, so above 1
// it lowers a seen token's logit whatever its sign, below 1 raises it; negative
// presence or frequency penalties raise seen tokens' logits (a result beyond float's range becomes
// +-inf, and a +inf one is picked as below). Greedy picks from the penalised
// row too. With every penalty off (the defaults) the row is used as given.
//
// NaN logits are never picked (treated as -inf). If some logit is +inf the
// lowest such id is returned. A row with no finite or +inf logit is an
// invalid_argument error.
//
// One sampler is used by one thread at a time. The history is a ring of
// penalty_window() ids allocated at construction. sample() allocates only when
// a row is larger than any row seen before (the candidate scratch, and with
// penalties on the penalised row and a per-id count table, grow once).
class Sampler {
public:
    explicit Sampler(const SamplerParams &params);

    // Picks a token and records it in the history.
    int32_t sample(std::span<const float> logits);
    // Records tokens the sampler did not draw (a prompt), oldest first.
    // Throws invalid_argument, recording none, if an id is negative.
    void accept(std::span<const int32_t> tokens);
    // Back to the state construction left it in: an empty history and the
    // generator reseeded from params().seed.
    void reset();
    const TokenHistory &history() const { return history_; }

    const SamplerParams &params() const { return params_; }
    const Xoshiro256 &rng() const { return rng_; }

    // Saved and restored through a state file's sampler section
    // (runtime/sampler_state.hpp).
    SamplerSnapshot snapshot() const { return {params_, rng_.state(), history_}; }
    // Becomes the sampler the snapshot was taken of. The snapshot must be
    // valid (validate() passes, the generator state is not all zero, the
    // history's capacity is params.penalty_window()), as decode_sampler_section
    // guarantees; then this cannot fail (the history is moved in).
    void restore(SamplerSnapshot &&snapshot);

private:
    struct Candidate {
        float logit;
        float weight;  // exp((logit - max) / temperature), in (0, 1]
        int32_t id;
    };

    int32_t pick(std::span<const float> logits);
    int32_t sample_filtered(std::span<const float> logits, float max_logit);
    // The row with the repetition penalties applied (in penalised_).
    std::span<const float> penalise(std::span<const float> logits);

    SamplerParams params_;
    Xoshiro256 rng_;
    TokenHistory history_;
    std::vector<Candidate> scratch_;
    std::vector<float> penalised_;
    std::vector<uint32_t> counts_;  // all zero between calls
};

}  // namespace moe
