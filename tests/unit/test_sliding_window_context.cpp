// A Context on gpt-oss-tiny with a window of 5 positions, over contexts many
// windows long: the sliding-window layers' rings give the logits of a cache
// that keeps every position, bit for bit, in one-token and multi-token steps
// (also every token's logits of one step) and with other thread counts; states saved with rings hold only the window
// and continue exactly, also into a context of another ring size, and states
// of every position (as format version 1 wrote them) load into rings; a step
// of several chunks that fails leaves the rings as they were; truncating
// goes back as far as the rings reach; the stats count the rings' memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "model/generator.hpp"
#include "runtime/context.hpp"
#include "runtime/state_file.hpp"
#include "support/generated_models.hpp"
#include "support/paths.hpp"
#include "support/scoped_env.hpp"
#include "support/status_of.hpp"

namespace {

using namespace moe;
using test::step;

constexpr int32_t kWindow = 5;
constexpr int32_t kCtx = 96;

// gpt-oss-tiny (4 layers, the even ones sliding) with a window of kWindow.
std::string tiny_model(const std::string &dir) {
    GeneratorConfig c;
    c.preset = "gpt-oss-tiny";
    c.sliding_window = kWindow;
    c.seed = 3;
    const std::string path = dir + "/gpt-oss-tiny-w5.gguf";
    generate_model(c, path);
    return path;
}

// max_batch kCtx: every layer keeps every position (the ring would be as long as the context).
ContextParams params(const std::string &path, bool exact, int32_t max_batch, int32_t threads = 2) {
    ContextParams p = test::context_params(path, exact, kCtx);
    p.max_batch = max_batch;
    p.n_threads = threads;
    p.profile_disabled = true;
    return p;
}

std::vector<int32_t> tokens(size_t n, uint32_t seed) {
    std::vector<int32_t> t;
    for (size_t i = 0; i < n; ++i) t.push_back(int32_t((i * 131 + seed * 17 + (i * i) % 7) % 512));
    return t;
}

bool same_bits(const std::vector<float> &a, const std::vector<float> &b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

bool has_rings(const Context &c) {
    const KvLayout &l = c.kv_cache().layout();
    for (int32_t i = 0; i < l.n_layer(); ++i)
        if (l.is_ring(i)) return true;
    return false;
}

class SlidingWindowRings : public ::testing::TestWithParam<bool> {};

TEST_P(SlidingWindowRings, LogitsEqualAFullCacheAtEveryPosition) {
    const bool exact = GetParam();
    const std::string path = tiny_model(test::scratch_dir());
    const std::vector<int32_t> t = tokens(90, 1);
    Context full(params(path, exact, kCtx));
    ASSERT_FALSE(has_rings(full));
    std::vector<std::vector<float>> want;
    for (int32_t tok : t) want.push_back(step(full, {tok}));

    // Rings of kWindow rows (one-token steps) and of kWindow + 6 rows (steps
    // of up to 7 tokens, longer ones in chunks), on 1 and 3 threads.
    Context one(params(path, exact, 1, 1));
    ASSERT_TRUE(has_rings(one));
    for (size_t i = 0; i < t.size(); ++i) ASSERT_TRUE(same_bits(step(one, {t[i]}), want[i])) << "position " << i;
    Context chunked(params(path, exact, 7, 3));
    ASSERT_TRUE(has_rings(chunked));
    size_t done = 0;
    for (const size_t n : {1, 3, 7, 13, 2, 20, 6, 8, 30}) {
        const std::vector<int32_t> part(t.begin() + long(done), t.begin() + long(done + n));
        done += n;
        ASSERT_TRUE(same_bits(step(chunked, part), want[done - 1])) << "step ending at position " << done - 1;
    }
    ASSERT_EQ(done, t.size());
    // Every token's logits of one step of 40 tokens (six chunks, the ring wrapping in each).
    Context all(params(path, exact, 7));
    step(all, std::vector<int32_t>(t.begin(), t.begin() + 50));
    const size_t n_vocab = size_t(all.n_vocab());
    std::vector<float> rows(40 * n_vocab);
    all.step(t.data() + 50, 40, rows.data(), true);
    for (size_t i = 0; i < 40; ++i) {
        const std::vector<float> row(rows.begin() + long(i * n_vocab), rows.begin() + long((i + 1) * n_vocab));
        ASSERT_TRUE(same_bits(row, want[50 + i])) << "every-token logits, position " << 50 + i;
    }
    // reset() starts again over the stale rows of the rings.
    one.reset();
    for (size_t i = 0; i < 12; ++i) ASSERT_TRUE(same_bits(step(one, {t[i]}), want[i])) << "after reset " << i;
}

INSTANTIATE_TEST_SUITE_P(Exact, SlidingWindowRings, ::testing::Bool());

TEST(SlidingWindowRings, StatsCountTheRings) {
    const std::string path = tiny_model(test::scratch_dir());
    Context full(params(path, false, kCtx)), ring(params(path, false, 4));
    moestream_stats a{}, b{};
    full.fill_stats(a);
    ring.fill_stats(b);
    const HParams &hp = ring.model().hparams();
    const uint64_t row = uint64_t(hp.n_head_kv) * uint64_t(hp.head_dim_k + hp.head_dim_v) * 2;
    // Two full layers of kCtx rows; two rings of kWindow + 3 rows with copies of kWindow - 1 rows.
    EXPECT_EQ(b.kv_bytes, (2 * kCtx + 2 * (kWindow + 3) + 2 * (kWindow - 1)) * row);
    EXPECT_EQ(a.kv_bytes, 4 * kCtx * row);
}

// Logits of each token of `cont`, one-token steps.
std::vector<std::vector<float>> continue_with(Context &c, const std::vector<int32_t> &cont) {
    std::vector<std::vector<float>> out;
    for (int32_t t : cont) out.push_back(step(c, {t}));
    return out;
}

Status truncate_status(Context &c, int32_t n_keep, std::string *message = nullptr) {
    return test::status_of([&] { c.truncate(n_keep); }, message);
}

// truncate goes back as far as every ring still holds the window of the next
// position (max_batch positions once the rings have wrapped, anywhere before)
// and then continues bit for bit as a context that never saw the forgotten
// tokens; further back it is refused and the context stays as it was.
TEST(SlidingWindowRings, TruncateContinuesExactlyAsFarAsTheRingsReach) {
    const std::string path = tiny_model(test::scratch_dir());
    const std::vector<int32_t> seen = tokens(36, 12), cont = tokens(9, 13);
    for (const int32_t batch : {1, 4, 7, kCtx}) {
        Context c(params(path, false, batch));
        step(c, std::vector<int32_t>(seen.begin(), seen.begin() + 30));
        step(c, std::vector<int32_t>(seen.begin() + 30, seen.end()));
        const int32_t n_past = c.n_past();
        // Rings of kWindow + batch - 1 rows (none with batch kCtx).
        const int32_t floor = batch == kCtx ? 0 : n_past - batch;
        ASSERT_EQ(c.kv_cache().min_keep(n_past), floor) << batch;
        if (floor > 0) {
            std::string message;
            EXPECT_EQ(truncate_status(c, floor - 1, &message), Status::unsupported) << batch;
            EXPECT_NE(message.find("cannot go back to " + std::to_string(floor - 1) + " tokens"), std::string::npos)
                << message;
            EXPECT_EQ(c.n_past(), n_past);
        }
        EXPECT_EQ(truncate_status(c, -1), Status::invalid_argument);
        EXPECT_EQ(truncate_status(c, n_past + 1), Status::invalid_argument);
        EXPECT_EQ(c.n_past(), n_past);
        const int32_t keep = std::max(floor, 20);
        c.truncate(keep);
        EXPECT_EQ(c.n_past(), keep);
        Context fresh(params(path, false, kCtx));
        step(fresh, std::vector<int32_t>(seen.begin(), seen.begin() + keep));
        const auto want = continue_with(fresh, cont), got = continue_with(c, cont);
        for (size_t i = 0; i < cont.size(); ++i)
            EXPECT_TRUE(same_bits(got[i], want[i])) << "max_batch " << batch << ", kept " << keep << ", token " << i;
    }
    // Before the rings wrap, any point is in reach.
    Context early(params(path, false, 1));
    step(early, tokens(kWindow, 14));
    ASSERT_EQ(early.kv_cache().min_keep(kWindow), 0);
    early.truncate(0);
    Context fresh(params(path, false, 1));
    EXPECT_TRUE(same_bits(step(early, cont), step(fresh, cont)));
}

uint32_t file_version(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    const std::vector<uint8_t> image{std::istreambuf_iterator<char>(in), {}};
    state::RawHeader h;
    EXPECT_TRUE(state::peek_header(image, h));
    return h.version;
}

TEST(SlidingWindowState, SavedWindowContinuesExactly) {
    const std::string dir = test::scratch_dir(), path = tiny_model(dir);
    const std::vector<int32_t> prompt = tokens(43, 2), cont = tokens(12, 3);
    Context ring(params(path, false, 4));
    step(ring, prompt);
    ring.save_state(dir + "/ring.state");
    EXPECT_EQ(file_version(dir + "/ring.state"), 2u);  // the sliding layers hold kWindow - 1 rows
    const auto want = continue_with(ring, cont);

    // Into a context of the same rings, another ring size, and no rings.
    for (const int32_t batch : {4, 1, 9, kCtx}) {
        Context c(params(path, false, batch));
        step(c, tokens(20, 9));  // something else first
        c.load_state(dir + "/ring.state");
        EXPECT_EQ(c.n_past(), int32_t(prompt.size()));
        const auto got = continue_with(c, cont);
        for (size_t i = 0; i < cont.size(); ++i) EXPECT_TRUE(same_bits(got[i], want[i])) << batch << " " << i;
    }
    // A context no longer than the window saves every row: version 1 still.
    Context early(params(path, false, 4));
    step(early, tokens(kWindow - 1, 4));
    early.save_state(dir + "/early.state");
    EXPECT_EQ(file_version(dir + "/early.state"), 1u);
}

// Writes the state of c, which holds `toks`, with the rows of positions
// first(layer) .. n_past - 1 of each layer (the context itself saves a
// sliding layer's window and a full layer's every row).
template <typename First>
void write_state(const Context &c, const std::vector<int32_t> &toks, const std::string &path, First first) {
    const int32_t n_past = c.n_past();
    const state::StateShape shape = c.state_shape();
    std::vector<int32_t> positions(static_cast<size_t>(n_past));
    for (int32_t i = 0; i < n_past; ++i) positions[size_t(i)] = i;
    const auto bytes_of = [](const std::vector<int32_t> &v) {
        return std::span<const uint8_t>(reinterpret_cast<const uint8_t *>(v.data()), v.size() * 4);
    };
    state::StateContents contents;
    contents.n_past = uint32_t(n_past);
    contents.sections.push_back({state::SectionType::tokens, 0, {bytes_of(toks)}});
    contents.sections.push_back({state::SectionType::positions, 0, {bytes_of(positions)}});
    for (uint32_t l = 0; l < shape.n_layer; ++l)
        for (const auto &[part, type] : {std::pair{KvPart::k, state::SectionType::kv_k},
                                         std::pair{KvPart::v, state::SectionType::kv_v}}) {
            const auto rows = c.kv_cache().row_bytes(part, int32_t(l), first(int32_t(l)), n_past);
            contents.sections.push_back({type, l, std::vector<std::span<const uint8_t>>(rows.begin(), rows.end())});
        }
    state::write_state_file(path, shape, contents);
}

// A state file of every position, as version 1 wrote them (and as this build
// still writes them for models without a window), loads into rings.
TEST(SlidingWindowState, VersionOneStatesOfEveryPositionLoadIntoRings) {
    const std::string dir = test::scratch_dir(), path = tiny_model(dir);
    const std::vector<int32_t> prompt = tokens(40, 5), cont = tokens(8, 6);
    Context full(params(path, false, kCtx));
    step(full, prompt);
    write_state(full, prompt, dir + "/v1.state", [](int32_t) { return 0; });
    ASSERT_EQ(file_version(dir + "/v1.state"), 1u);
    const auto want = continue_with(full, cont);

    Context ring(params(path, false, 3));
    ASSERT_TRUE(has_rings(ring));
    ring.load_state(dir + "/v1.state");
    const auto got = continue_with(ring, cont);
    for (size_t i = 0; i < cont.size(); ++i) EXPECT_TRUE(same_bits(got[i], want[i])) << i;
}

// A state whose sliding layers hold fewer rows than the window reads is
// refused, and the context stays as it was.
TEST(SlidingWindowState, AWindowWithRowsMissingIsRefused) {
    const std::string dir = test::scratch_dir(), path = tiny_model(dir);
    Context c(params(path, false, 4));
    const std::vector<int32_t> toks = tokens(30, 7);
    step(c, toks);
    // One row short of the window on the sliding (even) layers.
    write_state(c, toks, dir + "/short.state", [](int32_t l) { return l % 2 == 0 ? 30 - (kWindow - 2) : 0; });
    Context other(params(path, false, 4));
    step(other, tokens(6, 8));
    try {
        other.load_state(dir + "/short.state");
        FAIL() << "a window missing a row was loaded";
    } catch (const Error &e) {
        EXPECT_EQ(e.status(), Status::bad_format);
        EXPECT_NE(std::string(e.what()).find("layer 0 holds the rows of 3 positions but reads the last 4"),
                  std::string::npos)
            << e.what();
    }
    EXPECT_EQ(other.n_past(), 6);
    Context again(params(path, false, 4));
    step(again, tokens(6, 8));
    EXPECT_TRUE(same_bits(step(other, {1}), step(again, {1})));
}

// Expert reads failing at each point of a run whose second step is several
// chunks long: its later chunks wrap the rings onto the window its first
// tokens read, and the failed step must leave that window as it was. Run
// again, the generation gives the logits of a run that saw no fault.
TEST(SlidingWindowFaults, AFailedStepOfSeveralChunksLeavesTheRingsAsTheyWere) {
    const std::string path = tiny_model(test::scratch_dir());
    const std::vector<std::vector<int32_t>> steps = {tokens(11, 10), tokens(9, 11), {7}, {200}};
    ContextParams p = params(path, false, 2);
    p.io_mode = MOESTREAM_IO_PREAD;
    p.prefetch = MOESTREAM_PREFETCH_OFF;
    const test::ScopedEnv slots("MOESTREAM_CACHE_SLOTS", "8");  // one layer's experts: reads all along
    const auto run = [&](Context &c, int *failed) {
        std::vector<float> all, out(size_t(c.n_vocab()));
        for (const auto &s : steps) {
            const int32_t n_past = c.n_past();
            try {
                c.step(s.data(), int32_t(s.size()), out.data());
            } catch (const Error &e) {
                EXPECT_EQ(e.status(), Status::io) << e.what();
                EXPECT_EQ(c.n_past(), n_past);
                ++*failed;
                c.step(s.data(), int32_t(s.size()), out.data());
            }
            all.insert(all.end(), out.begin(), out.end());
        }
        return all;
    };
    int failed = 0;
    std::vector<float> want;
    uint64_t reads = 0;
    {
        Context c(p);
        want = run(c, &failed);
        moestream_stats s{};
        c.fill_stats(s);
        reads = s.io_reads_completed;
    }
    ASSERT_GT(reads, 0u);
    for (uint64_t after = 0; after < reads; ++after) {
        const std::string spec = "error:after=" + std::to_string(after);
        const test::ScopedEnv faults("MOESTREAM_FAULT_INJECT", spec);
        Context c(p);
        EXPECT_TRUE(same_bits(run(c, &failed), want)) << spec;
    }
    EXPECT_GT(failed, 0);
}

}  // namespace
