#include "runtime/sampler_state.hpp"

#include <bit>
#include <cstring>

#include "common/error.hpp"

namespace moe {
namespace {

// Offsets within the section (docs/state-format.md).
constexpr size_t kVersionAt = 0, kReservedAt = 4, kTemperatureAt = 8, kTopKAt = 12, kTopPAt = 16, kMinPAt = 20,
                 kSeedAt = 24, kRngAt = 32;
static_assert(kRngAt + Xoshiro256::kStateWords * 8 == kSamplerSectionBytes);

template <typename T>
void put(uint8_t *section, size_t at, T value) {
    static_assert(std::endian::native == std::endian::little, "sections are little-endian");
    std::memcpy(section + at, &value, sizeof value);
}

template <typename T>
T get(const uint8_t *section, size_t at) {
    T value;
    std::memcpy(&value, section + at, sizeof value);
    return value;
}

}  // namespace

std::array<uint8_t, kSamplerSectionBytes> encode_sampler_section(const SamplerSnapshot &s) {
    std::array<uint8_t, kSamplerSectionBytes> out{};
    put<uint32_t>(out.data(), kVersionAt, kSamplerSectionVersion);
    put<float>(out.data(), kTemperatureAt, s.params.temperature);
    put<int32_t>(out.data(), kTopKAt, s.params.top_k);
    put<float>(out.data(), kTopPAt, s.params.top_p);
    put<float>(out.data(), kMinPAt, s.params.min_p);
    put<uint64_t>(out.data(), kSeedAt, s.params.seed);
    for (size_t w = 0; w < Xoshiro256::kStateWords; ++w) put<uint64_t>(out.data(), kRngAt + 8 * w, s.rng[w]);
    return out;
}

SamplerSnapshot decode_sampler_section(std::span<const uint8_t> bytes, const std::string &label) {
    const char *lbl = label.c_str();
    if (bytes.size() < 4)
        fail(Status::bad_format, "%s: sampler section of %zu bytes is too short to hold its version", lbl,
             bytes.size());
    const uint8_t *p = bytes.data();
    const uint32_t version = get<uint32_t>(p, kVersionAt);
    if (version != kSamplerSectionVersion)
        fail(Status::unsupported, "%s: sampler section version %u; this build reads version %u", lbl, version,
             kSamplerSectionVersion);
    if (bytes.size() != kSamplerSectionBytes)
        fail(Status::bad_format, "%s: sampler section has %zu bytes, expected %zu", lbl, bytes.size(),
             kSamplerSectionBytes);
    if (get<uint32_t>(p, kReservedAt) != 0) fail(Status::bad_format, "%s: sampler section: reserved field is not zero", lbl);

    SamplerSnapshot s;
    s.params.temperature = get<float>(p, kTemperatureAt);
    s.params.top_k = get<int32_t>(p, kTopKAt);
    s.params.top_p = get<float>(p, kTopPAt);
    s.params.min_p = get<float>(p, kMinPAt);
    s.params.seed = get<uint64_t>(p, kSeedAt);
    try {
        validate(s.params);
    } catch (const Error &e) {
        fail(Status::bad_format, "%s: sampler section: %s", lbl, e.what());
    }
    for (size_t w = 0; w < Xoshiro256::kStateWords; ++w) s.rng[w] = get<uint64_t>(p, kRngAt + 8 * w);
    if (s.rng == Xoshiro256::State{})
        fail(Status::bad_format, "%s: sampler section: generator state is all zero (corrupt)", lbl);
    return s;
}

}  // namespace moe
