#include "runtime/sampler_state.hpp"

#include <bit>
#include <cstring>

#include "common/error.hpp"

namespace moe {
namespace {

// Offsets within the section (docs/state-format.md). Version 2 keeps
// version 1's fields where they were and appends the rest.
constexpr size_t kVersionAt = 0, kReservedAt = 4, kTemperatureAt = 8, kTopKAt = 12, kTopPAt = 16, kMinPAt = 20,
                 kSeedAt = 24, kRngAt = 32, kRepeatAt = 64, kPresenceAt = 68, kFrequencyAt = 72, kLastNAt = 76,
                 kHistorySizeAt = 80, kReserved2At = 84, kHistoryAt = 88;
static_assert(kRngAt + Xoshiro256::kStateWords * 8 == kSamplerSectionV1Bytes);
static_assert(kHistoryAt == kSamplerSectionV2HeadBytes);

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

std::vector<uint8_t> encode_sampler_section(const SamplerSnapshot &s) {
    const TokenHistory &history = s.history;
    std::vector<uint8_t> out(kSamplerSectionV2HeadBytes + 4 * history.size(), 0);
    uint8_t *p = out.data();
    put<uint32_t>(p, kVersionAt, kSamplerSectionVersion);
    put<float>(p, kTemperatureAt, s.params.temperature);
    put<int32_t>(p, kTopKAt, s.params.top_k);
    put<float>(p, kTopPAt, s.params.top_p);
    put<float>(p, kMinPAt, s.params.min_p);
    put<uint64_t>(p, kSeedAt, s.params.seed);
    for (size_t w = 0; w < Xoshiro256::kStateWords; ++w) put<uint64_t>(p, kRngAt + 8 * w, s.rng[w]);
    put<float>(p, kRepeatAt, s.params.repeat_penalty);
    put<float>(p, kPresenceAt, s.params.presence_penalty);
    put<float>(p, kFrequencyAt, s.params.frequency_penalty);
    put<int32_t>(p, kLastNAt, s.params.penalty_last_n);
    put<uint32_t>(p, kHistorySizeAt, static_cast<uint32_t>(history.size()));
    for (size_t i = 0; i < history.size(); ++i) put<int32_t>(p, kHistoryAt + 4 * i, history.oldest(i));
    return out;
}

SamplerSnapshot decode_sampler_section(std::span<const uint8_t> bytes, const std::string &label) {
    const char *lbl = label.c_str();
    if (bytes.size() < 4)
        fail(Status::bad_format, "%s: sampler section of %zu bytes is too short to hold its version", lbl,
             bytes.size());
    const uint8_t *p = bytes.data();
    const uint32_t version = get<uint32_t>(p, kVersionAt);
    if (version != 1 && version != 2)
        fail(Status::unsupported, "%s: sampler section version %u; this build reads versions 1 and 2", lbl, version);
    // Version 2's length depends on its history size, read once the head is known to be there.
    const size_t head = version == 1 ? kSamplerSectionV1Bytes : kSamplerSectionV2HeadBytes;
    const uint32_t n_history = version == 1 || bytes.size() < head ? 0 : get<uint32_t>(p, kHistorySizeAt);
    const uint64_t expected = head + 4 * uint64_t(n_history);
    if (bytes.size() != expected)
        fail(Status::bad_format, "%s: sampler section (version %u) has %zu bytes, expected %llu", lbl, version,
             bytes.size(), static_cast<unsigned long long>(expected));
    if (get<uint32_t>(p, kReservedAt) != 0 || (version == 2 && get<uint32_t>(p, kReserved2At) != 0))
        fail(Status::bad_format, "%s: sampler section: reserved field is not zero", lbl);

    SamplerSnapshot s;
    s.params.temperature = get<float>(p, kTemperatureAt);
    s.params.top_k = get<int32_t>(p, kTopKAt);
    s.params.top_p = get<float>(p, kTopPAt);
    s.params.min_p = get<float>(p, kMinPAt);
    s.params.seed = get<uint64_t>(p, kSeedAt);
    if (version == 2) {
        s.params.repeat_penalty = get<float>(p, kRepeatAt);
        s.params.presence_penalty = get<float>(p, kPresenceAt);
        s.params.frequency_penalty = get<float>(p, kFrequencyAt);
        s.params.penalty_last_n = get<int32_t>(p, kLastNAt);
    }
    try {
        validate(s.params);
    } catch (const Error &e) {
        fail(Status::bad_format, "%s: sampler section: %s", lbl, e.what());
    }
    for (size_t w = 0; w < Xoshiro256::kStateWords; ++w) s.rng[w] = get<uint64_t>(p, kRngAt + 8 * w);
    if (s.rng == Xoshiro256::State{})
        fail(Status::bad_format, "%s: sampler section: generator state is all zero (corrupt)", lbl);
    const size_t window = s.params.penalty_window();
    if (n_history > window)
        fail(Status::bad_format, "%s: sampler section: %u history tokens exceed the window of %zu (penalty_last_n %d)",
             lbl, n_history, window, s.params.penalty_last_n);
    s.history = TokenHistory(window);
    for (uint32_t i = 0; i < n_history; ++i) {
        const int32_t id = get<int32_t>(p, kHistoryAt + 4 * size_t(i));
        if (id < 0) fail(Status::bad_format, "%s: sampler section: history token %u is %d (negative)", lbl, i, id);
        s.history.push(id);
    }
    return s;
}

}  // namespace moe
