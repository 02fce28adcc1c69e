// The sampler section of a state file (docs/state-format.md, "Sampler
// section"): a sampler's parameters, generator state and token history.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/sampler.hpp"

namespace moe {

// Version 1: parameters without penalties and the generator, 64 bytes.
// Version 2 (written now): version 1's fields, the penalties and the history
// (88 bytes and 4 per history id).
inline constexpr size_t kSamplerSectionV1Bytes = 64;
inline constexpr size_t kSamplerSectionV2HeadBytes = 88;
inline constexpr uint32_t kSamplerSectionVersion = 2;

std::vector<uint8_t> encode_sampler_section(const SamplerSnapshot &snapshot);

// Checks every field before returning: the length (bad_format), the section
// version (unsupported unless 1 or 2), zero reserved bytes, parameters a
// sampler accepts, a generator state that is not all zero, a history no
// longer than the window with ids >= 0 (bad_format). Messages start with
// `label`. A version 1 section gives the penalties off, the default window
// and an empty history. A returned snapshot can always be restored.
SamplerSnapshot decode_sampler_section(std::span<const uint8_t> bytes, const std::string &label);

}  // namespace moe
