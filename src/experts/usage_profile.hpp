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

// Why a profile was not loaded, as far as it decides whether the file may be
// replaced: an absent or unusable one may, one that could not be read (no
// permission, an I/O error, not a plain file) holds what this process cannot see.
enum class ProfileLoadFailure { none, absent, unusable, unreadable };

// Reads a profile. Returns nullopt (and sets *why and *failure) when the file
// is absent, not a plain file (a pipe is not waited on), unreadable, malformed,
// or belongs to another model or shape: a profile is only a hint.
std::optional<UsageProfile> load_usage_profile(const std::string &path, uint64_t model_fingerprint,
                                               uint32_t n_layer, uint32_t n_expert, std::string *why = nullptr,
                                               ProfileLoadFailure *failure = nullptr);

// Writes atomically (temporary file + rename). Throws moe::Error(io) naming the path.
void save_usage_profile(const std::string &path, uint64_t model_fingerprint, const UsageProfile &profile);

// Adds one run's counts to the profile at `path` as it is when the run ends,
// not as it was when the run began: two contexts of one model each add their
// own counts instead of the later close dropping the earlier's. Saves of one
// directory are serialised (an advisory lock on the directory, where the file
// system has one). When the file is absent or unusable, `run` is added to
// `opened` (the profile the run started from; may be null). A file that could
// not be read is left as it is: throws moe::Error(io) naming why.
void add_to_usage_profile(const std::string &path, uint64_t model_fingerprint, const UsageProfile &run,
                          const UsageProfile *opened);

}  // namespace moe
