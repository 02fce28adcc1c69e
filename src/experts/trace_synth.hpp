// Synthetic routing traces with the statistics real MoE models show: skewed
// per-layer expert popularity and token-to-token reuse within a layer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "experts/routing_trace.hpp"

namespace moe {

struct SynthConfig {
    uint32_t n_layer = 48, n_expert = 128, n_expert_used = 8;
    uint64_t n_tokens = 1000;
    double reuse = 0.4;   // expected share of a layer's experts also used by the previous token
    // Locality over several tokens: each draw that is not a reuse comes, with
    // probability `recall`, from the experts the layer used in its last
    // `window` tokens (weighted by popularity) instead of from all experts.
    // 0 / 0 = order-1 routing (a token depends only on its predecessor).
    uint32_t window = 0;
    double recall = 0.0;
    // Zipf exponent of popularity when no heat is given. 0.47 gives the top 20%
    // of a layer's experts 40% of its routings (with top-8 of 128 and reuse
    // 0.4), the share usually quoted for real models.
    double skew = 0.47;
    uint64_t bytes_per_expert = 3059712;  // Qwen3-30B-A3B Q4_K_M expert (gate+up Q4_K, down Q6_K)
    uint64_t seed = 1;
    // Per-layer routing counts (n_layer x n_expert) of a real model; empty = Zipf.
    std::vector<std::vector<double>> heat;
};

// Reads a heat file (JSON with "heat": per-layer lists of counts, and
// optionally "k"/"n_expert"); fills heat and the shape fields of `config`.
void load_heat_file(const std::string &path, SynthConfig &config);

// Each token keeps every expert of its previous token's set in the same layer
// with probability `reuse` and draws the rest from the layer's popularity,
// excluding the previous set, so the expected reuse is exactly `reuse`; with
// a window, a draw first picks (probability `recall`) among the experts of the
// window's tokens, when any is left to pick. Draw
// weights are calibrated so each expert's share of routings matches the
// target popularity despite sampling without replacement and the reuse rule.
RoutingTrace synthesize_trace(const SynthConfig &config);

// Per-expert inclusion probabilities (expected routings per token) the
// synthesiser aims for: k * popularity, capped where an expert would have to
// be chosen more often than top-k routing with the given reuse allows
// (1 / (2 - reuse)), the excess spread over the other experts.
std::vector<double> feasible_inclusion(const std::vector<double> &popularity, uint32_t k, double reuse);

// Share of routings a layer's top 20% experts take under a popularity vector.
double top20_share(std::vector<double> popularity);

}  // namespace moe
