// The sampler section of a state file (docs/state-format.md, "Sampler
// section"): a sampler's parameters and generator state in 64 bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "runtime/sampler.hpp"

namespace moe {

inline constexpr size_t kSamplerSectionBytes = 64;
inline constexpr uint32_t kSamplerSectionVersion = 1;

std::array<uint8_t, kSamplerSectionBytes> encode_sampler_section(const SamplerSnapshot &snapshot);

// Checks every field before returning: the length (bad_format), the section
// version (unsupported), zero reserved bytes, parameters a sampler accepts and
// a generator state that is not all zero (bad_format). Messages start with
// `label`. A returned snapshot can always be restored.
SamplerSnapshot decode_sampler_section(std::span<const uint8_t> bytes, const std::string &label);

}  // namespace moe
