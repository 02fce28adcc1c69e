#include "runtime/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.hpp"
#include "common/splitmix64.hpp"

namespace moe {

namespace {

constexpr uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

void Xoshiro256::reseed(uint64_t seed) {
    for (uint64_t &word : s_) word = splitmix64(seed);
}

uint64_t Xoshiro256::next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
}

void Xoshiro256::set_state(const State &s) {
    if (s == State{}) fail(Status::invalid_argument, "xoshiro256 state must not be all zero");
    s_ = s;
}

void validate(const SamplerParams &p) {
    if (!std::isfinite(p.temperature) || p.temperature < 0.0f)
        fail(Status::invalid_argument, "sampler temperature is %g; expected a finite value >= 0",
             static_cast<double>(p.temperature));
    if (p.top_k < 0)
        fail(Status::invalid_argument, "sampler top_k is %d; expected >= 0 (0 = off)", p.top_k);
    if (!(p.top_p > 0.0f && p.top_p <= 1.0f))
        fail(Status::invalid_argument, "sampler top_p is %g; expected 0 < top_p <= 1 (1 = off)",
             static_cast<double>(p.top_p));
    if (!(p.min_p >= 0.0f && p.min_p <= 1.0f))
        fail(Status::invalid_argument, "sampler min_p is %g; expected 0 <= min_p <= 1 (0 = off)",
             static_cast<double>(p.min_p));
    if (!(std::isfinite(p.repeat_penalty) && p.repeat_penalty > 0.0f))
        fail(Status::invalid_argument, "sampler repeat_penalty is %g; expected a finite value > 0 (1 = off)",
             static_cast<double>(p.repeat_penalty));
    if (!std::isfinite(p.presence_penalty))
        fail(Status::invalid_argument, "sampler presence_penalty is %g; expected a finite value (0 = off)",
             static_cast<double>(p.presence_penalty));
    if (!std::isfinite(p.frequency_penalty))
        fail(Status::invalid_argument, "sampler frequency_penalty is %g; expected a finite value (0 = off)",
             static_cast<double>(p.frequency_penalty));
    if (p.penalty_last_n < kPenaltyWholeHistory || p.penalty_last_n > kMaxPenaltyLastN)
        fail(Status::invalid_argument,
             "sampler penalty_last_n is %d; expected 0 <= penalty_last_n <= %d, or %d for the whole history",
             p.penalty_last_n, kMaxPenaltyLastN, kPenaltyWholeHistory);
}

size_t SamplerParams::penalty_window() const {
    return static_cast<size_t>(penalty_last_n == kPenaltyWholeHistory ? kMaxPenaltyLastN : penalty_last_n);
}

namespace {

// Validates before anything is allocated for the parameters.
const SamplerParams &validated(const SamplerParams &params) {
    validate(params);
    return params;
}

}  // namespace

Sampler::Sampler(const SamplerParams &params)
    : params_(validated(params)), rng_(params.seed), history_(params.penalty_window()) {}

int32_t Sampler::sample(std::span<const float> logits) {
    if (logits.empty()) fail(Status::invalid_argument, "cannot sample from an empty logits row");
    if (logits.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
        fail(Status::invalid_argument, "logits row of %zu entries is too long", logits.size());
    // With penalties on, every draw (the first too, with an empty history)
    // goes through the penalised copy, so the first one sizes its buffers.
    const int32_t token = pick(params_.penalties_on() ? penalise(logits) : logits);
    history_.push(token);
    return token;
}

void Sampler::accept(std::span<const int32_t> tokens) {
    for (size_t i = 0; i < tokens.size(); ++i)
        if (tokens[i] < 0) fail(Status::invalid_argument, "token %zu is %d; token ids are >= 0", i, tokens[i]);
    history_.push(tokens);
}

void Sampler::reset() {
    history_.clear();
    rng_.reseed(params_.seed);
}

std::span<const float> Sampler::penalise(std::span<const float> logits) {
    const size_t n = logits.size();
    if (penalised_.size() < n) penalised_.resize(n);
    if (counts_.size() < n) counts_.resize(n, 0);
    std::copy(logits.begin(), logits.end(), penalised_.begin());
    // Count first, then penalise each id at its first occurrence and zero its
    // count, so every distinct id is penalised once and counts_ ends all zero.
    history_.for_each([&](int32_t id) {
        if (static_cast<size_t>(id) < n) ++counts_[static_cast<size_t>(id)];
    });
    const float repeat = params_.repeat_penalty;
    history_.for_each([&](int32_t id) {
        if (static_cast<size_t>(id) >= n) return;
        uint32_t &count = counts_[static_cast<size_t>(id)];
        if (count == 0) return;
        float &l = penalised_[static_cast<size_t>(id)];
        l = l > 0.0f ? l / repeat : l * repeat;
        l = l - (static_cast<float>(count) * params_.frequency_penalty + params_.presence_penalty);
        count = 0;
    });
    return {penalised_.data(), n};
}

int32_t Sampler::pick(std::span<const float> logits) {
    // One pass: the best id (lowest on ties), skipping NaN. +inf wins outright.
    int32_t best = -1;
    float max_logit = -std::numeric_limits<float>::infinity();
    for (size_t i = 0; i < logits.size(); ++i) {
        const float v = logits[i];
        if (std::isnan(v)) continue;
        if (best < 0 || v > max_logit) {
            best = static_cast<int32_t>(i);
            max_logit = v;
        }
    }
    if (best < 0 || max_logit == -std::numeric_limits<float>::infinity())
        fail(Status::invalid_argument, "all %zu logits are NaN or -inf; nothing to sample", logits.size());
    if (std::isinf(max_logit) || params_.temperature == 0.0f || params_.top_k == 1) return best;
    return sample_filtered(logits, max_logit);
}

int32_t Sampler::sample_filtered(std::span<const float> logits, float max_logit) {
    const double temperature = params_.temperature;
    // min-p in logit space: p_i >= min_p * p_max  <=>  l_i >= max + T * ln(min_p).
    // -inf when min_p is 0, which still drops NaN and -inf entries.
    const double threshold = params_.min_p > 0.0f
                                 ? max_logit + temperature * std::log(static_cast<double>(params_.min_p))
                                 : -std::numeric_limits<double>::infinity();

    if (scratch_.size() < logits.size()) scratch_.resize(logits.size());
    size_t n = 0;
    double total = 0.0;
    for (size_t i = 0; i < logits.size(); ++i) {
        const float v = logits[i];
        if (v > -std::numeric_limits<float>::infinity() && static_cast<double>(v) >= threshold) {
            const auto w = static_cast<float>(std::exp((static_cast<double>(v) - max_logit) / temperature));
            scratch_[n++] = Candidate{v, w, static_cast<int32_t>(i)};
            total += w;
        }
    }
    // v == max_logit always passes, so n >= 1.
    const auto first = scratch_.begin();
    const auto more_likely = [](const Candidate &a, const Candidate &b) {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    };
    // After this the first m candidates are the m most likely, in order.
    const auto order_prefix = [&](size_t m) {
        const auto mid = first + static_cast<ptrdiff_t>(m);
        if (m < n) std::nth_element(first, mid, first + static_cast<ptrdiff_t>(n), more_likely);
        std::sort(first, mid, more_likely);
    };
    const auto sum_prefix = [&](size_t m) {
        double sum = 0.0;
        for (size_t i = 0; i < m; ++i) sum += scratch_[i].weight;
        return sum;
    };

    if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) {
        order_prefix(static_cast<size_t>(params_.top_k));
        n = static_cast<size_t>(params_.top_k);
        total = sum_prefix(n);
    }
    if (params_.top_p < 1.0f) {
        // The smallest most-likely prefix with mass >= top_p. Only a prefix is
        // ever sorted, grown until it holds that mass (usually a few hundred
        // candidates even for a vocabulary of 150k).
        const double keep = params_.top_p * total;
        size_t ordered = std::min<size_t>(n, 256);
        for (;;) {
            order_prefix(ordered);
            double mass = 0.0;
            size_t kept = 0;
            while (kept < ordered && mass < keep) mass += scratch_[kept++].weight;
            if (mass >= keep || ordered == n) {
                n = kept;
                total = mass;
                break;
            }
            ordered = std::min(n, ordered * 4);
        }
    }

    const double target = rng_.next_unit() * total;
    double cumulative = 0.0;
    for (size_t i = 0; i < n; ++i) {
        cumulative += scratch_[i].weight;
        if (target < cumulative) return scratch_[i].id;
    }
    return scratch_[0].id;  // unreachable: target < total == the same sum in the same order
}

void Sampler::restore(SamplerSnapshot &&snapshot) {
    rng_.set_state(snapshot.rng);
    params_ = snapshot.params;
    history_ = std::move(snapshot.history);
}

}  // namespace moe
