// Usage profile file: how often each expert of each layer was routed, kept
// beside the model so the pinned-hot cache policy can start warm next time.
//
// Format (little-endian): "MOEUSAGE" | u32 version=1 | u32 n_layer |
// u32 n_expert | u32 reserved=0 | u64 model_fingerprint | u64 counts[n_layer * n_expert].
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "experts/cache_policy.hpp"

namespace moe {

// Reads a profile. Returns nullopt (and sets *why) when the file is absent,
// not a plain file (a pipe is not waited on), malformed, or belongs to another model or shape: a profile is only a hint.
std::optional<UsageProfile> load_usage_profile(const std::string &path, uint64_t model_fingerprint,
                                               uint32_t n_layer, uint32_t n_expert, std::string *why = nullptr);

// Writes atomically (temporary file + rename). Throws moe::Error(io) naming the path.
void save_usage_profile(const std::string &path, uint64_t model_fingerprint, const UsageProfile &profile);

}  // namespace moe
