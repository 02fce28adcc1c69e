// The sampler section of state files: a context and sampler saved part way
// through a seeded non-greedy generation and loaded into fresh ones draw
// exactly the tokens of the uninterrupted run; a damaged, truncated or absent
// sampler section is refused and leaves both the context and the sampler as
// they were.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "runtime/context.hpp"
#include "runtime/sampler.hpp"
#include "runtime/sampler_state.hpp"
#include "runtime/state_file.hpp"
#include "support/generated_models.hpp"
#include "support/paths.hpp"
#include "support/sampler_params.hpp"
#include "support/status_of.hpp"

namespace {

using moe::test::status_of;

std::string model_file() {
    return moe::test::generated_model("state_sampler_models", "qwen3moe",
                                      "--n-embd 128 --n-head 4 --n-head-kv 2 --n-layer 2 --n-expert 8 "
                                      "--n-expert-used 2 --n-ff-expert 128 --n-vocab 200 --n-ctx 64",
                                      "--seed 21");
}

#define REQUIRE_MODEL(var) REQUIRE_GENERATED_MODEL(var, model_file())

moe::ContextParams context_params(const std::string &path) {
    moe::ContextParams p;
    p.model_path = path;
    p.n_threads = 2;
    p.n_ctx = 48;
    p.profile_disabled = true;
    return p;
}

// Flat enough that many tokens are drawn.
moe::SamplerParams spread_sampler(uint64_t seed) { return moe::test::unfiltered(1.6f, seed); }

// Feeds `first` and then each drawn token back; returns the n drawn tokens.
std::vector<int32_t> generate(moe::Context &ctx, moe::Sampler &sampler, int32_t first, int n) {
    std::vector<float> logits(size_t(ctx.n_vocab()));
    std::vector<int32_t> drawn;
    int32_t token = first;
    for (int i = 0; i < n; ++i) {
        ctx.step(&token, 1, logits.data());
        token = sampler.sample(logits);
        drawn.push_back(token);
    }
    return drawn;
}

const std::vector<int32_t> kPrompt = {5, 17, 150, 3, 99, 42, 7};

std::vector<float> prompt_logits(moe::Context &ctx) {
    std::vector<float> logits(size_t(ctx.n_vocab()));
    ctx.step(kPrompt.data(), int32_t(kPrompt.size()), logits.data());
    return logits;
}

std::vector<int32_t> history_of(const moe::SamplerSnapshot &s) {
    std::vector<int32_t> ids;
    s.history.for_each([&](int32_t id) { ids.push_back(id); });
    return ids;
}

bool same_snapshot(const moe::SamplerSnapshot &a, const moe::SamplerSnapshot &b) {
    return a.rng == b.rng && std::memcmp(&a.params.temperature, &b.params.temperature, 4) == 0 &&
           a.params.top_k == b.params.top_k && a.params.top_p == b.params.top_p &&
           a.params.min_p == b.params.min_p && a.params.seed == b.params.seed &&
           a.params.repeat_penalty == b.params.repeat_penalty &&
           a.params.presence_penalty == b.params.presence_penalty &&
           a.params.frequency_penalty == b.params.frequency_penalty &&
           a.params.penalty_last_n == b.params.penalty_last_n && a.history.capacity() == b.history.capacity() &&
           history_of(a) == history_of(b);
}

moe::SamplerParams penalising_sampler(uint64_t seed) {
    moe::SamplerParams p = spread_sampler(seed);
    p.repeat_penalty = 1.8f;
    p.presence_penalty = 0.7f;
    p.frequency_penalty = 0.5f;
    p.penalty_last_n = 6;
    return p;
}

// The version 1 section (as files written before the penalties hold) of a
// snapshot: its first 64 bytes, version 1.
std::vector<uint8_t> version1_section(const moe::SamplerSnapshot &s) {
    std::vector<uint8_t> bytes = moe::encode_sampler_section(s);
    bytes.resize(moe::kSamplerSectionV1Bytes);
    const uint32_t v1 = 1;
    std::memcpy(bytes.data(), &v1, 4);
    return bytes;
}

template <typename T>
std::vector<uint8_t> bytes_of(T value) {
    std::vector<uint8_t> bytes(sizeof value);
    std::memcpy(bytes.data(), &value, sizeof value);
    return bytes;
}

std::vector<uint8_t> read_bytes(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string &path, const std::vector<uint8_t> &bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
}

// Rewrites a saved file whose last section is the sampler section: its data
// become `data` (any length), and the header's payload size and checksum are
// fixed up, so only the sampler section's own checks can refuse it.
std::vector<uint8_t> with_sampler_data(std::vector<uint8_t> image, const std::vector<uint8_t> &data) {
    moe::state::RawHeader raw;
    EXPECT_TRUE(moe::state::peek_header(image, raw));
    size_t at = moe::state::kHeaderSize, last = 0;
    for (uint32_t i = 0; i < raw.n_sections; ++i) {
        uint64_t length;
        std::memcpy(&length, image.data() + at + 8, 8);
        last = at;
        at += moe::state::kSectionHeaderSize + length + ((8 - (length & 7)) & 7);
    }
    uint32_t type;
    std::memcpy(&type, image.data() + last, 4);
    EXPECT_EQ(type, uint32_t(moe::state::SectionType::sampler));
    image.resize(last + moe::state::kSectionHeaderSize);
    const uint64_t length = data.size();
    std::memcpy(image.data() + last + 8, &length, 8);
    image.insert(image.end(), data.begin(), data.end());
    image.resize(image.size() + ((8 - (length & 7)) & 7), 0);
    const uint64_t payload = image.size() - moe::state::kHeaderSize;
    std::memcpy(image.data() + 64, &payload, 8);
    const uint64_t sum = moe::state::compute_checksum(image);
    std::memcpy(image.data() + moe::state::kChecksumOffset, &sum, 8);
    return image;
}

}  // namespace

TEST(SamplerSection, RoundTripsParametersAndGeneratorState) {
    moe::Sampler sampler(spread_sampler(99));
    std::vector<float> logits(50);
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = float(i % 7) * 0.3f;
    for (int i = 0; i < 5; ++i) sampler.sample(logits);
    const auto bytes = moe::encode_sampler_section(sampler.snapshot());
    const moe::SamplerSnapshot got = moe::decode_sampler_section(bytes, "x");
    EXPECT_TRUE(same_snapshot(got, sampler.snapshot()));

    // The draws depend on where the generator is: the same parameters from
    // the seed draw another sequence than the continued one.
    moe::Sampler from_seed(spread_sampler(99));
    moe::Sampler other(moe::SamplerParams{});
    other.restore(moe::SamplerSnapshot(got));
    int differ = 0;
    for (int i = 0; i < 20; ++i) {
        const int32_t t = sampler.sample(logits);
        ASSERT_EQ(other.sample(logits), t) << i;
        differ += from_seed.sample(logits) != t;
    }
    EXPECT_GT(differ, 0);
}

TEST(SamplerSection, GeneratorStateIsLittleEndianWordsAtOffset32) {
    // Seed 0's state is splitmix64's first four outputs from 0.
    const uint64_t words[4] = {0xe220a8397b1dcdafull, 0x6e789e6aa1b965f4ull, 0x06c45d188009454full,
                               0xf88bb8a8724c81ecull};
    const auto bytes = moe::encode_sampler_section(moe::Sampler(spread_sampler(0)).snapshot());
    for (size_t w = 0; w < 4; ++w)
        for (size_t b = 0; b < 8; ++b)
            EXPECT_EQ(bytes[32 + 8 * w + b], uint8_t(words[w] >> (8 * b))) << "word " << w << " byte " << b;
}

TEST(SamplerSection, HistoryAndPenaltiesRoundTrip) {
    moe::Sampler sampler(penalising_sampler(8));
    sampler.accept(std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 9});  // the ring has wrapped
    std::vector<float> logits(12);
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = float(i % 5) * 0.4f - 0.5f;
    for (int i = 0; i < 3; ++i) sampler.sample(logits);
    const auto bytes = moe::encode_sampler_section(sampler.snapshot());
    EXPECT_EQ(bytes.size(), moe::kSamplerSectionV2HeadBytes + 4 * 6);
    const moe::SamplerSnapshot got = moe::decode_sampler_section(bytes, "x");
    EXPECT_TRUE(same_snapshot(got, sampler.snapshot()));
    EXPECT_EQ(history_of(got).front(), 7);

    moe::Sampler other(moe::SamplerParams{});
    other.restore(moe::SamplerSnapshot(got));
    for (int i = 0; i < 40; ++i) ASSERT_EQ(other.sample(logits), sampler.sample(logits)) << i;
}

TEST(SamplerSection, WholeHistoryWindowAndNegativePenaltiesRoundTrip) {
    moe::SamplerParams p = penalising_sampler(12);
    p.presence_penalty = -0.4f;
    p.frequency_penalty = -0.25f;
    p.penalty_last_n = moe::kPenaltyWholeHistory;
    moe::Sampler sampler(p);
    std::vector<int32_t> prompt(100);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t(i % 9);
    sampler.accept(prompt);
    std::vector<float> logits(12);
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = float(i % 5) * 0.4f - 0.5f;
    for (int i = 0; i < 3; ++i) sampler.sample(logits);
    const auto bytes = moe::encode_sampler_section(sampler.snapshot());
    EXPECT_EQ(bytes.size(), moe::kSamplerSectionV2HeadBytes + 4 * 103);  // every token kept
    const moe::SamplerSnapshot got = moe::decode_sampler_section(bytes, "x");
    EXPECT_TRUE(same_snapshot(got, sampler.snapshot()));
    EXPECT_EQ(got.history.capacity(), size_t(moe::kMaxPenaltyLastN));

    moe::Sampler other(moe::SamplerParams{});
    other.restore(moe::SamplerSnapshot(got));
    for (int i = 0; i < 40; ++i) ASSERT_EQ(other.sample(logits), sampler.sample(logits)) << i;
}

TEST(SamplerSection, Version1SectionsLoadWithPenaltiesOffAndNoHistory) {
    moe::Sampler sampler(spread_sampler(31));
    sampler.accept(std::vector<int32_t>{4, 4});
    const moe::SamplerSnapshot got = moe::decode_sampler_section(version1_section(sampler.snapshot()), "old");
    EXPECT_EQ(got.rng, sampler.snapshot().rng);
    EXPECT_EQ(got.params.temperature, 1.6f);
    EXPECT_FALSE(got.params.penalties_on());
    EXPECT_EQ(got.params.penalty_last_n, moe::SamplerParams{}.penalty_last_n);
    EXPECT_TRUE(got.history.empty());
}

TEST(SamplerSection, DamagedSectionsAreRefusedNamingTheProblem) {
    moe::Sampler sampler(penalising_sampler(7));
    sampler.accept(std::vector<int32_t>{11, 12, 13});
    const auto good = moe::encode_sampler_section(sampler.snapshot());
    ASSERT_EQ(good.size(), moe::kSamplerSectionV2HeadBytes + 12);
    auto status = [](std::vector<uint8_t> bytes, std::string *msg = nullptr) {
        return status_of([&] { moe::decode_sampler_section(bytes, "f.state"); }, msg);
    };
    for (size_t n = 0; n < good.size(); ++n)
        EXPECT_EQ(status({good.begin(), good.begin() + long(n)}), moe::Status::bad_format) << n << " bytes";
    std::vector<uint8_t> longer(good.begin(), good.end());
    longer.push_back(0);
    EXPECT_EQ(status(longer), moe::Status::bad_format);

    // One field overwritten at a time (offsets from docs/state-format.md):
    // each is refused with the status and words that name the problem.
    struct Patch {
        const char *what;
        size_t at;
        std::vector<uint8_t> value;
        moe::Status want;
        const char *words;
    };
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const Patch patches[] = {
        {"version 3", 0, bytes_of(uint32_t(3)), moe::Status::unsupported, "version 3"},
        {"version 1 with version 2's length", 0, bytes_of(uint32_t(1)), moe::Status::bad_format, "expected 64"},
        {"first reserved field", 4, bytes_of(uint32_t(1)), moe::Status::bad_format, "reserved"},
        {"second reserved field", 84, bytes_of(uint32_t(1)), moe::Status::bad_format, "reserved"},
        {"temperature NaN", 8, bytes_of(nan), moe::Status::bad_format, "temperature"},
        {"top_k -1", 12, bytes_of(int32_t(-1)), moe::Status::bad_format, "top_k"},
        {"top_p 0", 16, bytes_of(0.0f), moe::Status::bad_format, "top_p"},
        {"min_p 2", 20, bytes_of(2.0f), moe::Status::bad_format, "min_p"},
        {"generator all zero", 32, std::vector<uint8_t>(32, 0), moe::Status::bad_format, "all zero"},
        {"repeat_penalty 0", 64, bytes_of(0.0f), moe::Status::bad_format, "repeat_penalty"},
        {"repeat_penalty NaN", 64, bytes_of(nan), moe::Status::bad_format, "repeat_penalty"},
        {"presence_penalty inf", 68, bytes_of(inf), moe::Status::bad_format, "presence_penalty"},
        {"frequency_penalty NaN", 72, bytes_of(nan), moe::Status::bad_format, "frequency_penalty"},
        {"window beyond the largest", 76, bytes_of(int32_t(moe::kMaxPenaltyLastN + 1)), moe::Status::bad_format,
         "penalty_last_n"},
        {"window -2", 76, bytes_of(int32_t(-2)), moe::Status::bad_format, "penalty_last_n"},
        {"history longer than the window", 76, bytes_of(int32_t(2)), moe::Status::bad_format, "exceed"},
        {"history size below the length", 80, bytes_of(uint32_t(2)), moe::Status::bad_format, "expected 96"},
        {"history size beyond the length", 80, bytes_of(uint32_t(4)), moe::Status::bad_format, "expected 104"},
        {"negative history id", 92, bytes_of(int32_t(-1)), moe::Status::bad_format, "negative"},
    };
    for (const Patch &p : patches) {
        std::vector<uint8_t> bytes = good;
        std::copy(p.value.begin(), p.value.end(), bytes.begin() + long(p.at));
        std::string msg;
        EXPECT_EQ(status(bytes, &msg), p.want) << p.what << ": " << msg;
        EXPECT_NE(msg.find(p.words), std::string::npos) << p.what << ": " << msg;
    }
}

TEST(StateWithSampler, ContinuingAfterLoadDrawsTheSameTokens) {
    REQUIRE_MODEL(path);
    const std::string file = moe::test::scratch_dir() + "/with_sampler.state";

    moe::Context original(context_params(path));
    moe::Sampler sampler(spread_sampler(1234));
    int32_t next = sampler.sample(prompt_logits(original));
    const std::vector<int32_t> before = generate(original, sampler, next, 4);
    next = before.back();
    original.save_state(file, &sampler);
    const std::vector<int32_t> uninterrupted = generate(original, sampler, next, 12);

    // The run must depend on the generator: another seed draws another sequence.
    {
        moe::Context c(context_params(path));
        moe::Sampler s(spread_sampler(4321));
        const int32_t t = s.sample(prompt_logits(c));
        std::vector<int32_t> seq = generate(c, s, t, 4);
        seq = generate(c, s, seq.back(), 12);
        EXPECT_NE(seq, uninterrupted);
    }

    // A fresh context and a sampler with other parameters and another seed.
    moe::Context fresh(context_params(path));
    moe::SamplerParams other;
    other.temperature = 0.0f;
    other.seed = 5;
    moe::Sampler restored(other);
    fresh.load_state(file, &restored);
    EXPECT_EQ(fresh.n_past(), int32_t(kPrompt.size() + before.size()));
    EXPECT_EQ(restored.params().temperature, 1.6f);
    EXPECT_EQ(restored.params().seed, 1234u);
    EXPECT_EQ(generate(fresh, restored, next, 12), uninterrupted);

    // The same file loads into a context alone; the sampler section is ignored.
    moe::Context alone(context_params(path));
    alone.load_state(file);
    EXPECT_EQ(alone.n_past(), fresh.n_past() - 12);
}

TEST(StateWithSampler, RefusedLoadsLeaveContextAndSamplerAsTheyWere) {
    REQUIRE_MODEL(path);
    const std::string dir = moe::test::scratch_dir();
    const std::string plain = dir + "/plain.state", with = dir + "/with.state", bad = dir + "/bad.state";

    moe::Context saver(context_params(path));
    moe::Sampler saver_sampler(spread_sampler(77));
    saver_sampler.sample(prompt_logits(saver));
    saver.save_state(plain);
    saver.save_state(with, &saver_sampler);
    const std::vector<uint8_t> image = read_bytes(with);

    moe::Context ctx(context_params(path));
    moe::Sampler sampler(spread_sampler(3));
    std::vector<float> logits(size_t(ctx.n_vocab()));
    const int32_t t = 11;
    ctx.step(&t, 1, logits.data());
    sampler.sample(logits);
    const moe::SamplerSnapshot sampler_before = sampler.snapshot();

    auto expect_refused = [&](const std::string &file, moe::Status want, const char *words, const char *what) {
        std::string msg;
        EXPECT_EQ(status_of([&] { ctx.load_state(file, &sampler); }, &msg), want) << what << ": " << msg;
        EXPECT_NE(msg.find(words), std::string::npos) << what << ": " << msg;
        EXPECT_EQ(ctx.n_past(), 1) << what;
        EXPECT_TRUE(same_snapshot(sampler.snapshot(), sampler_before)) << what;
    };
    expect_refused(plain, moe::Status::state_mismatch, "no sampler section", "file without a sampler");

    const std::vector<uint8_t> good = moe::encode_sampler_section(saver_sampler.snapshot());
    ASSERT_EQ(good.size(), moe::kSamplerSectionV2HeadBytes + 4);  // the one drawn token
    write_bytes(bad, with_sampler_data(image, {good.begin(), good.begin() + 40}));
    expect_refused(bad, moe::Status::bad_format, "sampler section", "truncated sampler section");
    write_bytes(bad, with_sampler_data(image, {}));
    expect_refused(bad, moe::Status::bad_format, "sampler section", "empty sampler section");
    std::vector<uint8_t> zero_rng = good;
    std::fill(zero_rng.begin() + 32, zero_rng.begin() + 64, 0);
    write_bytes(bad, with_sampler_data(image, zero_rng));
    expect_refused(bad, moe::Status::bad_format, "all zero", "zero generator state");
    std::vector<uint8_t> negative_id = good;
    std::fill(negative_id.end() - 4, negative_id.end(), 0xff);
    write_bytes(bad, with_sampler_data(image, negative_id));
    expect_refused(bad, moe::Status::bad_format, "negative", "negative history id");
    std::vector<uint8_t> long_history = good;
    long_history.resize(long_history.size() + 4, 0);
    write_bytes(bad, with_sampler_data(image, long_history));
    expect_refused(bad, moe::Status::bad_format, "sampler section", "history longer than its count");
    std::vector<uint8_t> flipped = image;
    flipped[flipped.size() - 3] ^= 0x10;  // in the sampler section's last bytes, checksum left as it was
    write_bytes(bad, flipped);
    expect_refused(bad, moe::Status::bad_format, "checksum", "flipped bit");
    write_bytes(bad, {image.begin(), image.end() - 8});
    expect_refused(bad, moe::Status::bad_format, "truncated", "truncated file");

    // The untouched file still loads, and the sampler continues as the saver's.
    ctx.load_state(with, &sampler);
    EXPECT_TRUE(same_snapshot(sampler.snapshot(), saver_sampler.snapshot()));
    // A context alone loads a file with a sampler section.
    ctx.reset();
    ctx.load_state(with);
    EXPECT_EQ(ctx.n_past(), int32_t(kPrompt.size()));
}

TEST(StateWithSampler, PenaltiesAndHistoryContinueTheSameTokens) {
    REQUIRE_MODEL(path);
    const std::string file = moe::test::scratch_dir() + "/with_history.state";

    moe::Context original(context_params(path));
    moe::Sampler sampler(penalising_sampler(555));
    sampler.accept(kPrompt);
    int32_t next = sampler.sample(prompt_logits(original));
    const std::vector<int32_t> before = generate(original, sampler, next, 5);
    next = before.back();
    original.save_state(file, &sampler);
    const moe::SamplerSnapshot saved = sampler.snapshot();
    const std::vector<int32_t> uninterrupted = generate(original, sampler, next, 14);

    // The continuation depends on the history: the same generator and
    // parameters with an empty history draw another sequence.
    {
        moe::Context c(context_params(path));
        c.load_state(file);
        moe::Sampler forgetful(spread_sampler(0));
        moe::SamplerSnapshot no_history{saved.params, saved.rng, moe::TokenHistory(size_t(saved.params.penalty_last_n))};
        forgetful.restore(std::move(no_history));
        EXPECT_NE(generate(c, forgetful, next, 14), uninterrupted);
    }

    moe::Context fresh(context_params(path));
    moe::Sampler restored(spread_sampler(9));
    fresh.load_state(file, &restored);
    EXPECT_TRUE(same_snapshot(restored.snapshot(), saved));
    EXPECT_EQ(generate(fresh, restored, next, 14), uninterrupted);
}

TEST(StateWithSampler, FilesWithAVersion1SectionStillLoad) {
    REQUIRE_MODEL(path);
    const std::string dir = moe::test::scratch_dir();
    const std::string file = dir + "/new.state", old = dir + "/old.state";

    moe::Context original(context_params(path));
    moe::Sampler sampler(spread_sampler(808));
    int32_t next = sampler.sample(prompt_logits(original));
    next = generate(original, sampler, next, 3).back();
    original.save_state(file, &sampler);
    // The file as a build without penalties wrote it: a 64-byte version 1 section.
    write_bytes(old, with_sampler_data(read_bytes(file), version1_section(sampler.snapshot())));
    const std::vector<int32_t> uninterrupted = generate(original, sampler, next, 10);

    moe::Context fresh(context_params(path));
    moe::SamplerParams other = penalising_sampler(1);
    moe::Sampler restored(other);
    restored.accept(std::vector<int32_t>{1, 2, 3});
    fresh.load_state(old, &restored);
    EXPECT_FALSE(restored.params().penalties_on());
    EXPECT_TRUE(restored.history().empty());
    EXPECT_EQ(restored.params().temperature, 1.6f);
    EXPECT_EQ(generate(fresh, restored, next, 10), uninterrupted);
}
