// Trace replay: Belady is optimal (checked against brute force), bounds every
// live policy, and the trace file round-trips.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.hpp"
#include "experts/routing_trace.hpp"
#include "experts/trace_replay.hpp"
#include "support/child_process.hpp"
#include "support/paths.hpp"
#include "support/status_of.hpp"

namespace {

using moe::RoutingTrace;

RoutingTrace random_trace(std::mt19937_64 &rng, uint32_t n_layer, uint32_t n_expert, uint32_t k, uint64_t n_tokens,
                          double skew) {
    RoutingTrace t = RoutingTrace::dense({n_layer, n_expert, k, 1000}, n_tokens);
    std::vector<double> w(n_expert);
    for (uint32_t e = 0; e < n_expert; ++e) w[e] = 1.0 / std::pow(e + 1.0, skew);
    for (uint64_t tok = 0; tok < n_tokens; ++tok)
        for (uint32_t l = 0; l < n_layer; ++l) {
            std::vector<double> ww = w;
            auto row = t.experts(tok, l);
            for (uint32_t i = 0; i < k; ++i) {
                std::discrete_distribution<uint32_t> pick(ww.begin(), ww.end());
                uint32_t e = pick(rng);
                row[i] = static_cast<uint16_t>(e);
                ww[e] = 0;
            }
        }
    return t;
}

// Fewest misses of any demand-paging schedule (every miss is admitted; any
// resident key may be evicted), by exhaustive search.
uint64_t brute_force_min_misses(const std::vector<uint32_t> &seq, size_t i, std::set<uint32_t> cache, uint32_t capacity,
                                std::map<std::pair<size_t, std::set<uint32_t>>, uint64_t> &memo) {
    if (i == seq.size()) return 0;
    auto key = std::make_pair(i, cache);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    uint64_t best;
    if (cache.count(seq[i])) {
        best = brute_force_min_misses(seq, i + 1, cache, capacity, memo);
    } else if (cache.size() < capacity) {
        cache.insert(seq[i]);
        best = 1 + brute_force_min_misses(seq, i + 1, cache, capacity, memo);
    } else {
        best = ~0ull;
        for (uint32_t victim : std::set<uint32_t>(cache)) {
            std::set<uint32_t> next = cache;
            next.erase(victim);
            next.insert(seq[i]);
            best = std::min(best, 1 + brute_force_min_misses(seq, i + 1, next, capacity, memo));
        }
    }
    memo[key] = best;
    return best;
}

std::vector<uint32_t> flatten(const RoutingTrace &t) {
    std::vector<uint32_t> seq;
    for (uint64_t tok = 0; tok < t.n_tokens; ++tok)
        for (uint32_t l = 0; l < t.header.n_layer; ++l)
            for (uint16_t e : t.experts(tok, l))
                if (e != moe::kTraceNoExpert) seq.push_back(l * t.header.n_expert + e);
    return seq;
}

struct RawRow {
    uint32_t token;
    uint16_t layer;
    uint16_t count;             // the row's "experts in this row" field
    std::vector<uint16_t> ids;  // exactly k entries
};

// Writes a trace byte by byte as docs/trace-format.md lays it out, so tests
// can feed the reader what its own writer never produces.
void write_raw_trace(const std::string &path, const moe::TraceHeader &h, const std::vector<RawRow> &rows,
                     uint64_t row_count_field) {
    std::ofstream out(path, std::ios::binary);
    auto put = [&out](auto v) { out.write(reinterpret_cast<const char *>(&v), sizeof v); };
    out.write("MOETRACE", 8);
    put(uint32_t(1));
    put(h.n_layer);
    put(h.n_expert);
    put(h.n_expert_used);
    put(h.bytes_per_expert);
    put(row_count_field);
    for (int i = 0; i < 24; ++i) put(uint8_t(0));
    for (const RawRow &r : rows) {
        put(r.token);
        put(r.layer);
        put(r.count);
        for (uint16_t e : r.ids) put(e);
    }
}

void write_raw_trace(const std::string &path, const moe::TraceHeader &h, const std::vector<RawRow> &rows) {
    write_raw_trace(path, h, rows, rows.size());
}

moe::Status read_status(const std::string &path, std::string *message) {
    return moe::test::status_of([&] { moe::read_routing_trace(path); }, message);
}

}  // namespace

TEST(Belady, HandCheckedSequence) {
    // One layer, one expert per token: 0 1 2 0 1 3 0 1 with 3 slots. Cold
    // misses on 0, 1, 2; at 3 the cache {0,1,2} evicts 2 (never used again);
    // 0 and 1 hit at tokens 3, 4, 6, 7.
    RoutingTrace t = RoutingTrace::dense({1, 4, 1, 10}, 8);
    t.ids = {0, 1, 2, 0, 1, 3, 0, 1};
    moe::ReplayResult r = moe::replay_belady(t, 3, 0);
    EXPECT_EQ(r.accesses, 8u);
    EXPECT_EQ(r.misses, 4u);
    EXPECT_EQ(r.hits, 4u);
    EXPECT_EQ(r.bytes_read, 40u);
    EXPECT_EQ(moe::replay_policy(t, moe::CachePolicyKind::lru, 3, 0).misses, 4u);
    // 0 1 2 3 0 1 2 3 with 3 slots: LRU always evicts the key needed next and
    // misses all 8; Belady evicts 2 at the first 3, then only 2 misses again.
    t.ids = {0, 1, 2, 3, 0, 1, 2, 3};
    EXPECT_EQ(moe::replay_policy(t, moe::CachePolicyKind::lru, 3, 0).misses, 8u);
    EXPECT_EQ(moe::replay_belady(t, 3, 0).misses, 5u);
}

TEST(Belady, MatchesBruteForceOnTinyTraces) {
    std::mt19937_64 rng(42);
    for (int trial = 0; trial < 60; ++trial) {
        const uint32_t n_layer = 1 + trial % 2, n_expert = 3 + trial % 3, k = 1 + trial % 2;
        const uint64_t n_tokens = 3 + trial % 4;
        RoutingTrace t = random_trace(rng, n_layer, n_expert, k, n_tokens, 0.5);
        const std::vector<uint32_t> seq = flatten(t);
        for (uint32_t capacity = k; capacity <= std::min<uint32_t>(n_layer * n_expert, 4); ++capacity) {
            std::map<std::pair<size_t, std::set<uint32_t>>, uint64_t> memo;
            const uint64_t best = brute_force_min_misses(seq, 0, {}, capacity, memo);
            EXPECT_EQ(moe::replay_belady(t, capacity, 0).misses, best) << "trial " << trial << " capacity " << capacity;
        }
    }
}

TEST(Belady, BoundsEveryPolicyOnRandomTraces) {
    std::mt19937_64 rng(7);
    const moe::CachePolicyKind kinds[] = {moe::CachePolicyKind::lru, moe::CachePolicyKind::lfu_decay,
                                          moe::CachePolicyKind::pinned_hot};
    for (int trial = 0; trial < 24; ++trial) {
        const uint32_t n_layer = 1 + trial % 4, n_expert = 8 + 4 * (trial % 3), k = 1 + trial % 3;
        RoutingTrace t = random_trace(rng, n_layer, n_expert, k, 40 + 10 * (trial % 5), 0.3 * (trial % 4));
        for (uint32_t capacity : {k, n_layer * k + 1, n_layer * n_expert / 2, n_layer * n_expert}) {
            for (uint64_t warmup : {uint64_t(0), t.n_tokens / 2}) {
                const moe::ReplayResult best = moe::replay_belady(t, capacity, warmup);
                for (auto kind : kinds) {
                    const moe::ReplayResult r = moe::replay_policy(t, kind, capacity, warmup);
                    EXPECT_EQ(r.accesses, best.accesses);
                    EXPECT_LE(r.hits, best.hits) << moe::cache_policy_name(kind) << " trial " << trial << " capacity "
                                                 << capacity << " warmup " << warmup;
                    EXPECT_EQ(r.hits + r.misses, r.accesses);
                }
            }
        }
    }
}

TEST(Replay, FullCacheOnlyMissesColdAndBytesFollowMisses) {
    std::mt19937_64 rng(3);
    RoutingTrace t = random_trace(rng, 3, 16, 4, 50, 1.0);
    std::set<uint32_t> distinct;
    for (uint32_t key : flatten(t)) distinct.insert(key);
    for (auto kind : {moe::CachePolicyKind::lru, moe::CachePolicyKind::lfu_decay, moe::CachePolicyKind::pinned_hot}) {
        moe::ReplayResult r = moe::replay_policy(t, kind, 48, 0);
        EXPECT_EQ(r.misses, distinct.size());
        EXPECT_EQ(r.bytes_read, r.misses * t.header.bytes_per_expert);
    }
    EXPECT_EQ(moe::replay_capacity(t, 0), 0u);
    EXPECT_EQ(moe::replay_capacity(t, 12345), 12u);
    EXPECT_EQ(moe::replay_capacity(t, ~0ull), 48u);
}

TEST(TraceFile, RoundTripsAndAcceptsRowsInAnyOrder) {
    const std::string dir = moe::test::scratch_dir();
    moe::TraceHeader h{2, 6, 2, 777};
    {
        moe::RoutingTraceWriter w(dir + "/a.trace", h);
        // Layer-major order, as a batched step visits them.
        const int32_t rows[4][2] = {{1, 2}, {3, 4}, {5, 0}, {2, 1}};
        w.record(0, 0, rows[0]);
        w.record(1, 0, rows[1]);
        w.record(0, 1, rows[2]);
        w.record(1, 1, std::span<const int32_t>(rows[3], 1));
        w.close();
    }
    RoutingTrace t = moe::read_routing_trace(dir + "/a.trace");
    EXPECT_EQ(t.header.bytes_per_expert, 777u);
    ASSERT_EQ(t.n_tokens, 2u);
    EXPECT_EQ(t.experts(0, 0)[0], 1);
    EXPECT_EQ(t.experts(1, 0)[1], 4);
    EXPECT_EQ(t.experts(0, 1)[0], 5);
    EXPECT_EQ(t.experts(1, 1)[0], 2);
    EXPECT_EQ(t.experts(1, 1)[1], moe::kTraceNoExpert);
    moe::write_routing_trace(dir + "/b.trace", t);
    RoutingTrace u = moe::read_routing_trace(dir + "/b.trace");
    EXPECT_EQ(u.ids, t.ids);
}

namespace {

// Files in `dir` other than `keep`: the temporaries writers have open or left behind.
size_t others_in(const std::string &dir, const std::string &keep) {
    size_t n = 0;
    for (const auto &e : std::filesystem::directory_iterator(dir)) n += e.path().filename() != keep;
    return n;
}

}  // namespace

TEST(TraceFile, AppearsAtItsPathOnlyWhenFinished) {
    const std::string dir = moe::test::scratch_dir();
    const std::string path = dir + "/done.trace";
    moe::TraceHeader h{1, 4, 2, 1};
    const int32_t row[2] = {0, 1};
    RoutingTrace earlier = RoutingTrace::dense(h, 1);
    const uint16_t earlier_experts[2] = {2, 3};
    std::copy(std::begin(earlier_experts), std::end(earlier_experts), earlier.experts(0, 0).begin());
    moe::write_routing_trace(path, earlier);
    {
        moe::RoutingTraceWriter w(path, h);
        w.record(0, 0, row);
        // While recording, the earlier trace stays whole at the path.
        EXPECT_EQ(moe::read_routing_trace(path).ids, earlier.ids);
        EXPECT_LE(others_in(dir, "done.trace"), 1u);  // the temporary, where it has a name (no O_TMPFILE)
        w.close();
    }
    EXPECT_EQ(moe::read_routing_trace(path).ids, (std::vector<uint16_t>{0, 1}));
    EXPECT_EQ(others_in(dir, "done.trace"), 0u);
    const uint16_t kept[2] = {0, 1};
    {
        moe::RoutingTraceWriter w(path, h);
        const int32_t other[2] = {3, 2};
        w.record(0, 0, other);
    }  // destroyed without close(), as when an exception unwinds its owner: discarded
    const RoutingTrace after = moe::read_routing_trace(path);
    const auto experts = after.experts(0, 0);
    EXPECT_TRUE(std::equal(experts.begin(), experts.end(), std::begin(kept), std::end(kept)));
    EXPECT_EQ(others_in(dir, "done.trace"), 0u);
}

// Two contexts recording to one path (two runs started at once) each write a
// file of their own: every close publishes one whole trace, the last wins.
TEST(TraceFile, TwoWritersToOnePathDoNotMixTheirRows) {
    const std::string dir = moe::test::scratch_dir();
    const std::string path = dir + "/shared.trace";
    const moe::TraceHeader h{2, 8, 2, 1};
    moe::RoutingTraceWriter a(path, h), b(path, h);
    const int32_t row_a[2] = {0, 1}, row_b[2] = {6, 7};
    for (uint64_t t = 0; t < 3; ++t)
        for (uint32_t l = 0; l < 2; ++l) {
            a.record(t, l, row_a);
            if (t < 2) b.record(t, l, row_b);
        }
    a.close();
    RoutingTrace got = moe::read_routing_trace(path);
    EXPECT_EQ(got.n_tokens, 3u);
    EXPECT_EQ(got.ids, (std::vector<uint16_t>{0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1}));
    b.close();
    got = moe::read_routing_trace(path);
    EXPECT_EQ(got.n_tokens, 2u);
    EXPECT_EQ(got.ids, (std::vector<uint16_t>{6, 7, 6, 7, 6, 7, 6, 7}));
    EXPECT_EQ(others_in(dir, "shared.trace"), 0u);
}

TEST(TraceFile, RejectsCorruptFiles) {
    const std::string dir = moe::test::scratch_dir();
    {
        std::ofstream(dir + "/bad.trace") << "not a trace at all, but long enough to hold a header.........";
    }
    EXPECT_THROW(moe::read_routing_trace(dir + "/bad.trace"), moe::Error);
    EXPECT_THROW(moe::read_routing_trace(dir + "/missing.trace"), moe::Error);
    RoutingTrace t = RoutingTrace::dense({1, 4, 2, 1}, 1);
    t.ids = {1, 1};  // the same expert twice in one row
    moe::write_routing_trace(dir + "/dup.trace", t);
    EXPECT_THROW(moe::read_routing_trace(dir + "/dup.trace"), moe::Error);
    // A truncated final row is an error when the header names the row count.
    moe::TraceHeader h{1, 4, 2, 1};
    moe::RoutingTraceWriter w(dir + "/cut.trace", h);
    const int32_t row[2] = {0, 1};
    w.record(0, 0, row);
    w.record(1, 0, row);
    w.close();
    std::FILE *f = std::fopen((dir + "/cut.trace").c_str(), "r+");
    ASSERT_NE(f, nullptr);
    std::fseek(f, 0, SEEK_END);
    const long size = std::ftell(f);
    std::fclose(f);
    ASSERT_EQ(::truncate((dir + "/cut.trace").c_str(), size - 3), 0);
    EXPECT_THROW(moe::read_routing_trace(dir + "/cut.trace"), moe::Error);
}

TEST(TraceFile, TokenIndexMustBeBelowTheRowCount) {
    // A reader holds the rows a file stores; a token index far beyond them
    // (one row claiming token 2^28 once asked for 512 MiB) is malformed.
    const std::string dir = moe::test::scratch_dir();
    const moe::TraceHeader h{1, 8, 1, 1000};
    for (uint32_t token : {1u << 28, 0xFFFFFFFFu, 1u}) {
        write_raw_trace(dir + "/far.trace", h, {{token, 0, 1, {3}}});
        std::string message;
        EXPECT_EQ(read_status(dir + "/far.trace", &message), moe::Status::bad_format) << token;
        EXPECT_NE(message.find("token " + std::to_string(token)), std::string::npos) << message;
    }
    write_raw_trace(dir + "/near.trace", h, {{1, 0, 1, {3}}, {0, 0, 1, {2}}});
    EXPECT_EQ(moe::read_routing_trace(dir + "/near.trace").n_tokens, 2u);
}

TEST(TraceFile, MissingRowsCostNothingAndTheLastDuplicateCounts) {
    // An interrupted batched recording: token 0 has all three layers, tokens
    // 1 and 2 only layer 0; token 1's layer 0 was recorded twice.
    const std::string dir = moe::test::scratch_dir();
    const moe::TraceHeader h{3, 8, 2, 1000};
    const uint16_t none = moe::kTraceNoExpert;
    write_raw_trace(dir + "/sparse.trace", h,
                    {{0, 0, 2, {1, 2}}, {1, 0, 1, {3, none}}, {2, 0, 2, {4, 5}}, {0, 1, 2, {6, 7}},
                     {0, 2, 1, {0, none}}, {1, 0, 2, {5, 6}}},
                    ~0ull);
    const RoutingTrace t = moe::read_routing_trace(dir + "/sparse.trace");
    ASSERT_EQ(t.n_tokens, 3u);
    EXPECT_EQ(t.ids.size(), 5u * 2);  // five distinct rows of k = 2
    EXPECT_EQ(t.experts(0, 1)[1], 7);
    EXPECT_EQ(t.experts(0, 2)[0], 0);
    EXPECT_EQ(t.experts(1, 0)[0], 5);
    EXPECT_EQ(t.experts(1, 0)[1], 6);
    EXPECT_TRUE(t.experts(1, 1).empty());
    EXPECT_TRUE(t.experts(2, 2).empty());
    EXPECT_EQ(t.experts(2, 0)[1], 5);
    EXPECT_EQ(flatten(t), (std::vector<uint32_t>{1, 2, 14, 15, 16, 5, 6, 4, 5}));
    // Cutting it keeps every field in step: token 0's three rows and token 1's one.
    RoutingTrace cut = t;
    cut.truncate(2);
    EXPECT_EQ(cut.n_tokens, 2u);
    EXPECT_EQ(cut.ids.size(), 4u * 2);
    EXPECT_EQ(cut.experts(1, 0)[1], 6);
    EXPECT_EQ(flatten(cut), (std::vector<uint32_t>{1, 2, 14, 15, 16, 5, 6}));
}

TEST(TraceFile, ShapesBeyondTheLimitsAreBadFormat) {
    // Replay keeps state for every layer x expert key: 4096 layers of 65534
    // experts in an 84-byte file once made it allocate over 4 GB.
    const std::string dir = moe::test::scratch_dir();
    const std::string path = dir + "/wide.trace";
    std::string message;
    write_raw_trace(path, {4096, 65534, 1, 1}, {{0, 0, 1, {3}}});
    EXPECT_EQ(read_status(path, &message), moe::Status::bad_format);
    EXPECT_NE(message.find("1048576 layer x expert keys"), std::string::npos) << message;
    write_raw_trace(path, {moe::kMaxTraceLayers + 1, 1, 1, 1}, {{0, 0, 1, {0}}});
    EXPECT_EQ(read_status(path, &message), moe::Status::bad_format);
    write_raw_trace(path, {1024, 1024, 1, 1}, {{0, 1023, 1, {1023}}});  // exactly the key limit
    EXPECT_EQ(moe::read_routing_trace(path).n_tokens, 1u);
    EXPECT_EQ(moe::test::status_of([&] { moe::RoutingTraceWriter(path, {1024, 1025, 1, 1}); }),
              moe::Status::bad_format);
}

TEST(TraceFile, OnlyTheRowsCountedEntriesAreExperts) {
    // The writer pads a row of fewer than k experts with 0xFFFF; an expert
    // past the row's count contradicts the count and is malformed.
    const std::string dir = moe::test::scratch_dir();
    const moe::TraceHeader h{1, 8, 3, 1000};
    const uint16_t none = moe::kTraceNoExpert;
    write_raw_trace(dir + "/ok.trace", h, {{0, 0, 1, {4, none, none}}, {1, 0, 0, {none, none, none}}});
    const RoutingTrace t = moe::read_routing_trace(dir + "/ok.trace");
    EXPECT_EQ(flatten(t), std::vector<uint32_t>{4});
    std::string message;
    write_raw_trace(dir + "/past.trace", h, {{0, 0, 1, {4, 5, none}}});
    EXPECT_EQ(read_status(dir + "/past.trace", &message), moe::Status::bad_format);
    EXPECT_NE(message.find("row 0: entry 1 is expert 5, past the row's 1 experts"), std::string::npos) << message;
    write_raw_trace(dir + "/empty.trace", h, {{0, 0, 0, {none, none, 2}}});
    EXPECT_EQ(read_status(dir + "/empty.trace", &message), moe::Status::bad_format);
}

TEST(TraceFile, AllExpertBytesMustFitSixtyFourBits) {
    // 2^63 bytes per expert over 2 x 8 keys once wrapped to "expert bytes 0 B".
    const std::string dir = moe::test::scratch_dir();
    const std::string path = dir + "/bytes.trace";
    std::string message;
    write_raw_trace(path, {2, 8, 1, uint64_t(1) << 63}, {{0, 0, 1, {3}}});
    EXPECT_EQ(read_status(path, &message), moe::Status::bad_format);
    EXPECT_NE(message.find("9223372036854775808 bytes per expert"), std::string::npos) << message;
    const uint64_t most = UINT64_MAX / 16;
    write_raw_trace(path, {2, 8, 1, most}, {{0, 0, 1, {3}}});
    EXPECT_EQ(moe::trace_expert_bytes(moe::read_routing_trace(path).header), most * 16);
    // Bytes read saturate rather than wrap.
    RoutingTrace t = RoutingTrace::dense({1, 2, 1, UINT64_MAX}, 2);
    t.ids = {0, 1};
    EXPECT_EQ(moe::replay_policy(t, moe::CachePolicyKind::lru, 1, 0).bytes_read, UINT64_MAX);
    EXPECT_EQ(moe::replay_belady(t, 1, 0).bytes_read, UINT64_MAX);
}

// A write that fails part way (a full disk; here a file size limit, in a child
// so the limit does not leak) fails the step that recorded the row; when the
// step is run again with room on the disk, the trace must hold every row once,
// not the failed write's fragment followed by the rows again.
// Rows recorded after a mark (a step that failed) are dropped by rewind,
// whether still buffered or already flushed to the file, and the next rows
// take their place: the finished trace holds only the rows kept.
TEST(TraceFile, RewoundRowsAreDroppedFromTheBufferAndTheFile) {
    const std::string dir = moe::test::scratch_dir();
    const moe::TraceHeader h{2, 8, 2, 1};
    auto row_of = [](uint64_t token, uint32_t layer, uint64_t salt) {
        return std::array<int32_t, 2>{int32_t((token + layer + salt) % 8), int32_t((token + layer + salt + 1) % 8)};
    };
    // kept tokens, then tokens recorded and rewound (few: in the buffer; many: flushed), then more kept ones
    for (const uint64_t dropped : {uint64_t(3), uint64_t(9000)}) {
        SCOPED_TRACE(dropped);
        const std::string path = dir + "/rewind.trace";
        const uint64_t kept = 100, after = 50;
        {
            moe::RoutingTraceWriter w(path, h);
            for (uint64_t t = 0; t < kept; ++t)
                for (uint32_t l = 0; l < 2; ++l) w.record(t, l, row_of(t, l, 0));
            const uint64_t mark = w.rows();
            for (uint64_t t = kept; t < kept + dropped; ++t)
                for (uint32_t l = 0; l < 2; ++l) w.record(t, l, row_of(t, l, 5));  // 12-byte rows: 9000 tokens flush
            w.rewind(mark);
            EXPECT_EQ(w.rows(), mark);
            for (uint64_t t = kept; t < kept + after; ++t)
                for (uint32_t l = 0; l < 2; ++l) w.record(t, l, row_of(t, l, 0));
            w.close();
        }
        const RoutingTrace t = moe::read_routing_trace(path);
        ASSERT_EQ(t.n_tokens, kept + after);
        ASSERT_EQ(t.row_layer.size(), (kept + after) * 2);
        for (uint64_t tok = 0; tok < t.n_tokens; ++tok)
            for (uint32_t l = 0; l < 2; ++l) {
                const auto e = t.experts(tok, l);
                const auto want = row_of(tok, l, 0);
                ASSERT_EQ(e.size(), 2u);
                EXPECT_EQ(e[0], want[0]) << tok << " " << l;
                EXPECT_EQ(e[1], want[1]) << tok << " " << l;
            }
    }
    std::filesystem::remove_all(dir);
}

TEST(TraceFile, AWriteThatFailedPartWayIsRedoneInPlace) {
    const std::string dir = moe::test::scratch_dir();
    const std::string path = dir + "/full.trace";
    const moe::TraceHeader h{2, 8, 2, 1};
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim {10001, RLIM_INFINITY};  // not a whole number of rows past the header
        if (setrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(4);
        try {
            moe::RoutingTraceWriter w(path, h);
            uint64_t token = 0;
            bool failed = false;
            for (; token < 20000 && !failed; ++token)  // 12-byte rows: the first flush comes at 64 KiB
                for (uint32_t l = 0; l < 2; ++l) {
                    const int32_t row[2] = {int32_t(token % 8), int32_t((token + 1) % 8)};
                    try {
                        w.record(token, l, row);
                    } catch (const moe::Error &) {
                        failed = true;
                    }
                }
            if (!failed) _exit(5);
            lim.rlim_cur = RLIM_INFINITY;  // room again
            if (setrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(4);
            for (uint64_t t = token - 1; t < token + 10; ++t)  // the failed token again, and more
                for (uint32_t l = 0; l < 2; ++l) {
                    const int32_t row[2] = {int32_t(t % 8), int32_t((t + 1) % 8)};
                    w.record(t, l, row);
                }
            w.close();
            const RoutingTrace t = moe::read_routing_trace(path);
            if (t.n_tokens != token + 10) _exit(6);
            for (uint64_t tok = 0; tok < t.n_tokens; ++tok)
                for (uint32_t l = 0; l < 2; ++l) {
                    const auto e = t.experts(tok, l);
                    if (e.size() != 2 || e[0] != tok % 8 || e[1] != (tok + 1) % 8) _exit(7);
                }
            _exit(0);
        } catch (...) {
            _exit(3);
        }
    }
    EXPECT_EQ(moe::test::wait_exit_code(pid), 0);
}
