// StreamingExpertSource and the packed expert file on small generated,
// expert-shaped files whose slices start at unaligned offsets.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <chrono>
#include <random>
#include <thread>
#include <set>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.hpp"
#include "experts/packed_file.hpp"
#include "experts/streaming_source.hpp"
#include "experts/usage_profile.hpp"
#include "io/fault_injection.hpp"
#include "support/child_process.hpp"
#include "support/paths.hpp"
#include "support/read_backends.hpp"

namespace {

using namespace moe;

// A file laid out like a GGUF data section: per layer, one gate, up and down
// tensor holding all experts back to back, after an odd-sized header.
struct ExpertFile {
    std::string path;
    std::vector<uint8_t> bytes;
    std::vector<ExpertLayerLayout> layers;
    uint64_t fingerprint = 0;

    const uint8_t *expected(int32_t layer, int32_t expert, int matrix) const {
        const ExpertLayerLayout &l = layers[size_t(layer)];
        const ExpertMatrixLayout &m = matrix == 0 ? l.gate : matrix == 1 ? l.up : l.down;
        return bytes.data() + m.file_offset + uint64_t(expert) * m.expert_stride;
    }
    uint64_t matrix_bytes(int32_t layer, int matrix) const {
        const ExpertLayerLayout &l = layers[size_t(layer)];
        return (matrix == 0 ? l.gate : matrix == 1 ? l.up : l.down).expert_bytes();
    }
};

ExpertFile make_expert_file(const std::string &dir, int32_t n_layer, int32_t n_expert, uint32_t seed) {
    ExpertFile f;
    f.path = dir + "/model.bin";
    std::mt19937 rng(seed);
    uint64_t pos = 777;  // header
    for (int32_t l = 0; l < n_layer; ++l) {
        ExpertLayerLayout L;
        L.n_expert = (l == 1) ? 0 : n_expert;  // a dense layer in the middle
        const int64_t cols = 64, rows = 24 + 8 * l;
        for (int i = 0; i < 3 && L.n_expert > 0; ++i) {
            ExpertMatrixLayout &m = i == 0 ? L.gate : i == 1 ? L.up : L.down;
            m.type = GgmlType::F32;
            m.cols = i == 2 ? rows : cols;
            m.rows = i == 2 ? cols : rows;
            m.shard = 0;
            pos += 32 + (rng() % 5) * 4;  // unaligned gaps like tensor padding
            m.file_offset = pos;
            m.expert_stride = uint64_t(m.cols * m.rows) * 4;
            pos += m.expert_stride * uint64_t(L.n_expert);
        }
        f.layers.push_back(L);
    }
    f.bytes.resize(pos + 100);
    for (auto &b : f.bytes) b = uint8_t(rng());
    std::ofstream(f.path, std::ios::binary).write(reinterpret_cast<const char *>(f.bytes.data()), f.bytes.size());
    f.fingerprint = model_fingerprint(f.bytes.data(), 777);
    return f;
}

void expect_view(const ExpertFile &f, int32_t layer, const ReadyExpert &r) {
    ASSERT_EQ(0, std::memcmp(r.view.gate, f.expected(layer, r.expert, 0), f.matrix_bytes(layer, 0)))
        << "gate of expert " << r.expert << " layer " << layer;
    ASSERT_EQ(0, std::memcmp(r.view.up, f.expected(layer, r.expert, 1), f.matrix_bytes(layer, 1)))
        << "up of expert " << r.expert << " layer " << layer;
    ASSERT_EQ(0, std::memcmp(r.view.down, f.expected(layer, r.expert, 2), f.matrix_bytes(layer, 2)))
        << "down of expert " << r.expert << " layer " << layer;
}

struct Variant {
    const char *backend;
    bool direct;
    bool packed;
    CachePolicyKind policy;
};

std::string variant_name(const Variant &v) {
    std::string n = std::string(v.backend) + (v.direct ? "_direct" : "_buffered") + (v.packed ? "_packed" : "_gguf") +
                     "_" + cache_policy_name(v.policy);
    for (char &c : n)
        if (c == '-') c = '_';
    return n;
}

class StreamingVariants : public ::testing::TestWithParam<Variant> {};

// Random layers, random expert sets, right and wrong prefetches, a cache of
// just one layer's worth of slots: every requested expert comes back exactly
// once with the file's bytes, and its view stays valid until end_layer.
TEST_P(StreamingVariants, EveryExpertExactlyOnceWithCorrectBytes) {
    const Variant v = GetParam();
    if (std::string(v.backend) == "io_uring" && !io::io_uring_unavailable_reason().empty())
        GTEST_SKIP() << io::io_uring_unavailable_reason();
    const std::string dir = test::scratch_dir();
    const int32_t n_layer = 4, n_expert = 8;
    ExpertFile f = make_expert_file(dir, n_layer, n_expert, 11);
    Stats stats;
    StreamingSourceConfig cfg;
    cfg.layers = f.layers;
    cfg.shard_paths = {f.path};
    cfg.model_fingerprint = f.fingerprint;
    if (v.packed) {
        cfg.packed_path = default_packed_path(f.path);
        write_packed_file(cfg.packed_path, f.fingerprint, f.layers, cfg.shard_paths);
        cfg.verify_checksums = true;
    }
    cfg.direct = v.direct;
    cfg.slots = n_expert + 2;
    cfg.policy = v.policy;
    UsageProfile profile{uint32_t(n_layer), uint32_t(n_expert), std::vector<uint64_t>(n_layer * n_expert, 0)};
    profile.counts[3] = 10;
    profile.counts[2 * n_expert + 5] = 7;
    cfg.profile = &profile;
    cfg.queue_depth = 8;
    cfg.backend = std::string(v.backend) == "io_uring" ? io::BackendKind::io_uring : io::BackendKind::pread;
    cfg.stats = &stats;
    StreamingExpertSource src(std::move(cfg));
    EXPECT_EQ(src.reading_packed(), v.packed);

    std::mt19937 rng(5);
    uint64_t requested = 0;
    for (int step = 0; step < 150; ++step) {
        int32_t layer = int32_t(rng() % n_layer);
        if (f.layers[size_t(layer)].n_expert == 0) layer = 0;
        std::vector<int32_t> all(n_expert);
        for (int32_t i = 0; i < n_expert; ++i) all[size_t(i)] = i;
        std::shuffle(all.begin(), all.end(), rng);
        all.resize(1 + rng() % n_expert);
        src.begin_layer(layer, all);
        requested += all.size();
        std::set<int32_t> seen;
        std::vector<ReadyExpert> got;
        for (size_t i = 0; i < all.size(); ++i) {
            ReadyExpert r = src.next_ready();
            ASSERT_TRUE(seen.insert(r.expert).second) << "expert " << r.expert << " returned twice";
            ASSERT_NE(std::find(all.begin(), all.end(), r.expert), all.end());
            expect_view(f, layer, r);
            got.push_back(r);
            if (i == 0 && rng() % 2) {  // a prefetch while the layer runs (lookahead)
                const int32_t next = (layer + 2) % n_layer;
                std::vector<int32_t> hint{int32_t(rng() % n_expert), int32_t(rng() % n_expert)};
                if (hint[0] == hint[1]) hint.pop_back();
                src.prefetch(next, hint);
            }
        }
        for (const auto &r : got) expect_view(f, layer, r);  // still valid after the others arrived
        src.end_layer(layer);
        if (rng() % 3 == 0) src.prefetch(layer, std::vector<int32_t>{all[0], int32_t(rng() % n_expert)});
    }
    src.drain();
    EXPECT_EQ(stats.cache_hits + stats.cache_misses, requested);
    EXPECT_GT(stats.cache_misses, 0u);
    EXPECT_GT(stats.bytes_read_demand, 0u);
    EXPECT_LE(stats.prefetch_useful, stats.prefetch_issued + profile.counts.size());
    uint64_t per_layer = 0;
    for (int l = 0; l < n_layer; ++l) per_layer += stats.layer_hits[size_t(l)] + stats.layer_misses[size_t(l)];
    EXPECT_EQ(per_layer, requested);
    EXPECT_LE(src.resident_keys().size(), src.slots());
    std::filesystem::remove_all(dir);
}

std::vector<Variant> all_variants() {
    std::vector<Variant> out;
    for (const char *b : {"pread", "io_uring"})
        for (bool direct : {false, true})
            for (bool packed : {false, true}) out.push_back(Variant{b, direct, packed, CachePolicyKind::lru});
    out.push_back(Variant{"pread", true, false, CachePolicyKind::lfu_decay});
    out.push_back(Variant{"io_uring", true, true, CachePolicyKind::pinned_hot});
    out.push_back(Variant{"pread", false, true, CachePolicyKind::pinned_hot});
    return out;
}

INSTANTIATE_TEST_SUITE_P(All, StreamingVariants, ::testing::ValuesIn(all_variants()),
                         [](const auto &info) { return variant_name(info.param); });

// LRU over `slots` slots, queue depth 8, counting into `stats` when given.
StreamingSourceConfig basic_config(const ExpertFile &f, uint32_t slots, Stats *stats = nullptr) {
    StreamingSourceConfig cfg;
    cfg.stats = stats;
    cfg.layers = f.layers;
    cfg.shard_paths = {f.path};
    cfg.model_fingerprint = f.fingerprint;
    cfg.slots = slots;
    cfg.queue_depth = 8;
    cfg.policy = CachePolicyKind::lru;
    return cfg;
}

std::vector<int32_t> iota_experts(int32_t n) {
    std::vector<int32_t> e(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) e[size_t(i)] = i;
    return e;
}

// One visit of `layer`: every expert asked for comes back with the file's bytes.
void visit_layer(StreamingExpertSource &src, const ExpertFile &f, int32_t layer, const std::vector<int32_t> &experts) {
    src.begin_layer(layer, experts);
    for (size_t i = 0; i < experts.size(); ++i) expect_view(f, layer, src.next_ready());
    src.end_layer(layer);
}

TEST(StreamingSource, SecondVisitIsAllHits) {
    const std::string dir = test::scratch_dir();
    ExpertFile f = make_expert_file(dir, 3, 6, 2);
    Stats stats;
    auto cfg = basic_config(f, 6, &stats);
    StreamingExpertSource src(std::move(cfg));
    const auto experts = iota_experts(6);
    for (int pass = 0; pass < 2; ++pass) visit_layer(src, f, 2, experts);
    EXPECT_EQ(stats.cache_misses, 6u);
    EXPECT_EQ(stats.cache_hits, 6u);
    EXPECT_EQ(stats.layer_hits[2], 6u);
    std::filesystem::remove_all(dir);
}

// The saved profile adds this run's counts to the loaded one's; counts near
// UINT64_MAX saturate there instead of wrapping to small numbers, which
// would turn the hottest experts into the coldest.
TEST(StreamingSource, SavedProfileSaturatesInsteadOfWrapping) {
    const std::string dir = test::scratch_dir();
    ExpertFile f = make_expert_file(dir, 1, 4, 4);
    UsageProfile loaded{1, 4, {UINT64_MAX - 1, UINT64_MAX, 7, 0}};
    auto cfg = basic_config(f, 4);
    cfg.profile = &loaded;
    cfg.profile_save_path = dir + "/usage.moeusage";
    {
        StreamingExpertSource src(std::move(cfg));
        for (int pass = 0; pass < 3; ++pass) visit_layer(src, f, 0, {0, 1, 2});
    }
    const auto saved = load_usage_profile(dir + "/usage.moeusage", f.fingerprint, 1, 4);
    ASSERT_TRUE(saved.has_value());
    EXPECT_EQ(saved->counts, (std::vector<uint64_t>{UINT64_MAX, UINT64_MAX, 10, 0}));
    std::filesystem::remove_all(dir);
}

// A source that routed nothing (closed unused, or an open that failed after
// it was made) leaves the profile file as it is: not created, and an
// existing one (even one of another model, which a run's counts would
// replace) not rewritten.
TEST(StreamingSource, ASourceThatRoutedNothingLeavesTheProfileAlone) {
    const std::string dir = test::scratch_dir();
    ExpertFile f = make_expert_file(dir, 1, 4, 4);
    const std::string path = dir + "/usage.moeusage";
    {
        auto cfg = basic_config(f, 4);
        cfg.profile_save_path = path;
        StreamingExpertSource src(std::move(cfg));
    }
    EXPECT_FALSE(std::filesystem::exists(path));
    save_usage_profile(path, f.fingerprint + 1, UsageProfile{1, 4, {3, 0, 0, 1}});
    const auto before = std::filesystem::last_write_time(path);
    const auto inode = [&] {
        struct stat st {};
        ::stat(path.c_str(), &st);
        return st.st_ino;
    };
    const auto inode_before = inode();
    {
        auto cfg = basic_config(f, 4);
        cfg.profile_save_path = path;
        StreamingExpertSource src(std::move(cfg));
    }
    EXPECT_EQ(inode(), inode_before) << "the profile was replaced";
    EXPECT_EQ(std::filesystem::last_write_time(path), before);
    EXPECT_TRUE(load_usage_profile(path, f.fingerprint + 1, 1, 4).has_value());
    std::filesystem::remove_all(dir);
}

// Two contexts of one model open side by side, both from the same saved
// profile: each close adds its own run's counts to the file as it is then,
// so the later close keeps the earlier's counts instead of writing over them.
TEST(StreamingSource, ProfilesOfContextsClosedOneAfterTheOtherAddUp) {
    const std::string dir = test::scratch_dir();
    ExpertFile f = make_expert_file(dir, 1, 4, 4);
    const std::string path = dir + "/usage.moeusage";
    save_usage_profile(path, f.fingerprint, UsageProfile{1, 4, {5, 0, 0, 1}});
    const auto opened = load_usage_profile(path, f.fingerprint, 1, 4);
    ASSERT_TRUE(opened.has_value());
    auto config = [&] {
        auto cfg = basic_config(f, 4);
        cfg.profile = &*opened;
        cfg.profile_save_path = path;
        return cfg;
    };
    {
        StreamingExpertSource a(config()), b(config());
        for (int pass = 0; pass < 2; ++pass) visit_layer(a, f, 0, {0, 1});
        visit_layer(b, f, 0, {2});
    }  // b closes first, then a
    const auto saved = load_usage_profile(path, f.fingerprint, 1, 4);
    ASSERT_TRUE(saved.has_value());
    EXPECT_EQ(saved->counts, (std::vector<uint64_t>{7, 2, 1, 1}));
    std::filesystem::remove_all(dir);
}

// Saves through a symbolic link take the lock of the directory the file is
// written in, so they wait for a save through the file's own path.
TEST(StreamingSource, AProfileSavedThroughALinkWaitsForTheLockOfItsFilesDirectory) {
    const std::string dir = test::scratch_dir();
    const std::string real_dir = dir + "/real", link_dir = dir + "/links";
    std::filesystem::create_directories(real_dir);
    std::filesystem::create_directories(link_dir);
    const std::string path = real_dir + "/usage.moeusage", link = link_dir + "/usage.moeusage";
    save_usage_profile(path, 7, UsageProfile{1, 2, {1, 1}});
    std::filesystem::create_symlink(path, link);
    const int held = ::open(real_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(held, 0);
    ASSERT_EQ(::flock(held, LOCK_EX), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        alarm(10);
        ::close(held);  // the lock stays with the parent's descriptor; this copy would hold it too
        add_to_usage_profile(link, 7, UsageProfile{1, 2, {1, 0}}, nullptr);
        _exit(0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    int status = 0;
    EXPECT_EQ(::waitpid(pid, &status, WNOHANG), 0) << "saved while the file's directory was locked";
    ::close(held);  // releases the lock
    EXPECT_EQ(moe::test::wait_exit_code(pid), 0);
    const auto saved = load_usage_profile(path, 7, 1, 2);
    ASSERT_TRUE(saved.has_value());
    EXPECT_EQ(saved->counts, (std::vector<uint64_t>{2, 1}));
    std::filesystem::remove_all(dir);
}

// A profile this process cannot read (permissions here; an I/O error alike)
// may hold another user's counts: closing leaves it as it is rather than
// replacing it with this run's. Run as an unprivileged user in a child, since
// root reads the file regardless of its mode.
TEST(StreamingSource, AProfileThatCannotBeReadIsLeftAsItIs) {
    const std::string dir = test::scratch_dir();
    ExpertFile f = make_expert_file(dir, 1, 4, 4);
    const std::string path = dir + "/usage.moeusage";
    save_usage_profile(path, f.fingerprint, UsageProfile{1, 4, {9, 9, 9, 9}});
    ASSERT_EQ(::chmod(path.c_str(), 0), 0);
    ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);  // the child may write a temporary beside it
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        if (::geteuid() == 0 && ::setuid(65534) != 0) _exit(2);
        std::string why;
        ProfileLoadFailure failure = ProfileLoadFailure::none;
        if (load_usage_profile(path, f.fingerprint, 1, 4, &why, &failure) ||
            failure != ProfileLoadFailure::unreadable)
            _exit(3);
        try {
            add_to_usage_profile(path, f.fingerprint, UsageProfile{1, 4, {1, 0, 0, 0}}, nullptr);
        } catch (const Error &e) {
            _exit(e.status() == Status::io && std::string(e.what()).find("left as it is") != std::string::npos ? 0
                                                                                                                 : 4);
        }
        _exit(5);
    }
    const int code = moe::test::wait_exit_code(pid);
    if (code == 2) GTEST_SKIP() << "cannot drop privileges here";
    EXPECT_EQ(code, 0);
    ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
    const auto kept = load_usage_profile(path, f.fingerprint, 1, 4);
    ASSERT_TRUE(kept.has_value());
    EXPECT_EQ(kept->counts, (std::vector<uint64_t>{9, 9, 9, 9}));
    std::filesystem::remove_all(dir);
}

TEST(StreamingSource, UsefulAndWastedPrefetchesAreCounted) {
    const std::string dir = test::scratch_dir();
    ExpertFile f = make_expert_file(dir, 3, 6, 3);
    Stats stats;
    auto cfg = basic_config(f, 8, &stats);
    cfg.queue_depth = 32;  // prefetches may use half: all three fit
    StreamingExpertSource src(std::move(cfg));
    const std::vector<int32_t> hint{0, 1, 2};
    src.prefetch(0, hint);
    src.drain();
    EXPECT_EQ(stats.prefetch_issued, 3u);
    EXPECT_GT(stats.bytes_read_prefetch, 0u);
    const std::vector<int32_t> want{0, 4};
    visit_layer(src, f, 0, want);
    EXPECT_EQ(stats.prefetch_useful, 1u);
    // Experts 1 and 2 were wrong: they are the first to go.
    const std::vector<int32_t> more{0, 1, 2, 3, 4, 5};
    visit_layer(src, f, 2, more);
    EXPECT_GT(stats.bytes_read_wasted, 0u);
    EXPECT_GT(stats.evictions, 0u);
    std::filesystem::remove_all(dir);
}

TEST(StreamingSource, HintRanksThatKeepMissingStopBeingReadAndComeBackWhenRight) {
    const std::string dir = test::scratch_dir();
    ExpertFile f = make_expert_file(dir, 3, 48, 5);
    Stats stats;
    auto cfg = basic_config(f, 8, &stats);
    cfg.queue_depth = 32;
    StreamingExpertSource src(std::move(cfg));
    const std::vector<int32_t> want{3};
    // Rank 0 (expert 3) is always right, rank 1 never: rank 1 stops being read.
    uint64_t issued_at_10 = 0;
    for (int round = 0; round < 20; ++round) {
        const std::vector<int32_t> hint{3, int32_t(4 + round % 12)};
        src.prefetch(2, hint);
        src.drain();  // every hint let through is read in full
        visit_layer(src, f, 2, want);
        if (round == 9) issued_at_10 = stats.prefetch_issued;
    }
    EXPECT_LT(issued_at_10, 10u);
    EXPECT_EQ(stats.prefetch_issued, issued_at_10) << "a rank that was always wrong is still read";
    // The same rank turns right: it is read again once its decayed precision
    // is back above the bar (from ~0 to 0.9 at weight 1/8: 18 rounds).
    for (int round = 0; round < 24 && stats.prefetch_issued == issued_at_10; ++round) {
        const std::vector<int32_t> hint{3, int32_t(16 + round)};
        src.prefetch(2, hint);
        src.drain();
        visit_layer(src, f, 2, {3, int32_t(16 + round)});
    }
    EXPECT_GT(stats.prefetch_issued, issued_at_10);
    // With no threshold every hint is read.
    Stats all_stats;
    auto all_cfg = basic_config(f, 8, &all_stats);
    all_cfg.queue_depth = 32;
    all_cfg.prefetch_min_precision = 0.0f;
    StreamingExpertSource all(std::move(all_cfg));
    for (int round = 0; round < 12; ++round) {
        const std::vector<int32_t> hint{int32_t(4 + round)};
        all.prefetch(2, hint);
        all.drain();
        visit_layer(all, f, 2, want);
    }
    EXPECT_EQ(all_stats.prefetch_issued, 12u);
    std::filesystem::remove_all(dir);
}

TEST(StreamingSource, ALayersFirstHintsFollowWhatTheRankProvedInOtherLayers) {
    const std::string dir = test::scratch_dir();
    ExpertFile f = make_expert_file(dir, 3, 48, 5);
    Stats stats;
    auto cfg = basic_config(f, 8);
    cfg.stats = &stats;
    cfg.queue_depth = 32;
    StreamingExpertSource src(std::move(cfg));
    // In layer 0, rank 0 is always right and rank 1 always wrong.
    for (int round = 0; round < 16; ++round) {
        const std::vector<int32_t> hint{3, int32_t(4 + round)};
        src.prefetch(0, hint);
        src.drain();
        visit_layer(src, f, 0, {3});
    }
    // Layer 2 has never been hinted: its rank 1 is not read, its rank 0 is.
    const uint64_t before = stats.prefetch_issued;
    const std::vector<int32_t> hint{10, 11};
    src.prefetch(2, hint);
    src.drain();
    EXPECT_EQ(stats.prefetch_issued, before + 1);
    const std::vector<uint32_t> keys = src.resident_keys();
    EXPECT_NE(std::find(keys.begin(), keys.end(), 2u * 48u + 10u), keys.end());
    EXPECT_EQ(std::find(keys.begin(), keys.end(), 2u * 48u + 11u), keys.end());
    std::filesystem::remove_all(dir);
}

// Passes reads through but hands completions back only when the source
// waits, so what the source submits between two waits does not depend on how
// fast the reads are.
class CompletesOnlyOnWait final : public io::ForwardingBackend {
public:
    using ForwardingBackend::ForwardingBackend;
    size_t reap(std::span<io::ReadCompletion> out, bool wait) override { return wait ? inner().reap(out, true) : 0; }
};

uint32_t key_of(int32_t layer, int32_t expert, int32_t n_expert) { return uint32_t(layer * n_expert + expert); }

bool is_resident(const StreamingExpertSource &src, uint32_t key) {
    const std::vector<uint32_t> keys = src.resident_keys();
    return std::find(keys.begin(), keys.end(), key) != keys.end();
}

TEST(StreamingSource, NearerHintsAreReadFirstAndFarOnesAreReplacedAtEachLayer) {
    const std::string dir = test::scratch_dir();
    const int32_t n_expert = 8;
    ExpertFile f = make_expert_file(dir, 5, n_expert, 7);  // layer 1 is dense
    Stats stats;
    auto cfg = basic_config(f, 16, &stats);
    cfg.queue_depth = 8;  // prefetches may use 4 reads: one expert (3 parts) at a time
    cfg.backend_override = std::make_unique<CompletesOnlyOnWait>(io::make_read_backend(io::BackendKind::pread, 8));
    StreamingExpertSource src(std::move(cfg));
    src.begin_layer(0, std::vector<int32_t>{0});
    // As the forward pass hints, except that the far hint comes first: the
    // near one must still be read first.
    src.prefetch(3, std::vector<int32_t>{6}, 2);
    src.prefetch(2, std::vector<int32_t>{5}, 1);
    expect_view(f, 0, src.next_ready());
    src.end_layer(0);
    EXPECT_EQ(stats.prefetch_issued, 1u);  // (2, 5) in flight; (3, 6) waits behind it
    src.begin_layer(2, std::vector<int32_t>{5});
    EXPECT_EQ(stats.prefetch_useful, 1u);
    EXPECT_EQ(stats.cache_hits, 1u);
    // Layer 2's own lookahead: (3, 6) again from one layer ahead, (4, 7) from two.
    src.prefetch(3, std::vector<int32_t>{6}, 1);
    src.prefetch(4, std::vector<int32_t>{7}, 2);
    expect_view(f, 2, src.next_ready());
    src.end_layer(2);
    src.begin_layer(3, std::vector<int32_t>{6});  // drops the unread (4, 7)
    expect_view(f, 3, src.next_ready());
    src.end_layer(3);
    src.drain();
    EXPECT_EQ(stats.prefetch_issued, 2u);
    EXPECT_EQ(stats.prefetch_useful, 2u);
    EXPECT_EQ(stats.cache_misses, 1u);  // only layer 0's demand read
    EXPECT_FALSE(is_resident(src, key_of(4, 7, n_expert)));
    // With room in the queue a far hint is read at once.
    src.prefetch(4, std::vector<int32_t>{7}, 3);
    src.drain();
    EXPECT_EQ(stats.prefetch_issued, 3u);
    EXPECT_TRUE(is_resident(src, key_of(4, 7, n_expert)));
    std::filesystem::remove_all(dir);
}

TEST(StreamingSource, PrefetchesWaitUntilTheLayersDemandReadsHaveLanded) {
    const std::string dir = test::scratch_dir();
    const int32_t n_expert = 8;
    ExpertFile f = make_expert_file(dir, 3, n_expert, 9);
    Stats stats;
    auto cfg = basic_config(f, 16, &stats);
    cfg.queue_depth = 32;  // room for every read at once: only the rule holds prefetches back
    cfg.backend_override = std::make_unique<CompletesOnlyOnWait>(io::make_read_backend(io::BackendKind::pread, 32));
    StreamingExpertSource src(std::move(cfg));
    src.begin_layer(0, std::vector<int32_t>{0, 1});
    src.prefetch(2, std::vector<int32_t>{3, 4});
    EXPECT_EQ(stats.prefetch_issued, 0u) << "a prefetch started beside the layer's demand reads";
    expect_view(f, 0, src.next_ready());
    expect_view(f, 0, src.next_ready());
    // Both demand experts have landed: the prefetches run while the layer computes.
    EXPECT_EQ(stats.prefetch_issued, 2u);
    src.end_layer(0);
    // A layer that needs no read does not hold its hints back.
    src.begin_layer(0, std::vector<int32_t>{0, 1});
    src.prefetch(2, std::vector<int32_t>{5});
    EXPECT_EQ(stats.prefetch_issued, 3u);
    expect_view(f, 0, src.next_ready());
    expect_view(f, 0, src.next_ready());
    src.end_layer(0);
    src.drain();
    visit_layer(src, f, 2, {3, 4, 5});
    EXPECT_EQ(stats.prefetch_useful, 3u);
    EXPECT_EQ(stats.cache_misses, 2u);
    std::filesystem::remove_all(dir);
}

TEST(StreamingSource, ProgressStartsHeldPrefetchesWithoutAWait) {
    const std::string dir = test::scratch_dir();
    ExpertFile f = make_expert_file(dir, 3, 8, 13);
    Stats stats;
    auto cfg = basic_config(f, 16, &stats);
    cfg.queue_depth = 32;
    StreamingExpertSource src(std::move(cfg));
    src.begin_layer(0, std::vector<int32_t>{0});
    src.prefetch(2, std::vector<int32_t>{3});
    EXPECT_EQ(stats.prefetch_issued, 0u);
    // As between two compute tasks: the demand read lands on its own time,
    // progress() takes it and starts the held prefetch.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (stats.prefetch_issued == 0 && std::chrono::steady_clock::now() < give_up) {
        src.progress();
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    EXPECT_EQ(stats.prefetch_issued, 1u);
    ReadyExpert r;
    ASSERT_TRUE(src.try_next_ready(r)) << "progress took the demand read but did not hand it over";
    EXPECT_EQ(r.expert, 0);
    expect_view(f, 0, r);
    src.end_layer(0);
    src.drain();
    visit_layer(src, f, 2, {3});
    EXPECT_EQ(stats.prefetch_useful, 1u);
    std::filesystem::remove_all(dir);
}

TEST(StreamingSource, TryNextReadyHandsOutOnlyWhatHasLanded) {
    const std::string dir = test::scratch_dir();
    ExpertFile f = make_expert_file(dir, 3, 8, 11);
    Stats stats;
    auto cfg = basic_config(f, 16, &stats);
    cfg.backend_override = std::make_unique<CompletesOnlyOnWait>(io::make_read_backend(io::BackendKind::pread, 32));
    StreamingExpertSource src(std::move(cfg));
    visit_layer(src, f, 0, {1, 2});
    src.begin_layer(0, std::vector<int32_t>{1, 2, 3});  // two hits, one read that lands only on a wait
    std::vector<int32_t> got;
    ReadyExpert r;
    while (src.try_next_ready(r)) {
        expect_view(f, 0, r);
        got.push_back(r.expert);
    }
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, (std::vector<int32_t>{1, 2}));
    r = src.next_ready();
    EXPECT_EQ(r.expert, 3);
    expect_view(f, 0, r);
    EXPECT_FALSE(src.try_next_ready(r)) << "more experts than the layer asked for";
    src.end_layer(0);
    EXPECT_FALSE(src.try_next_ready(r)) << "an expert handed out with no layer open";
    std::filesystem::remove_all(dir);
}

TEST(StreamingSource, EachLookaheadDistanceEarnsItsOwnPrecision) {
    const std::string dir = test::scratch_dir();
    const int32_t n_expert = 48;
    ExpertFile f = make_expert_file(dir, 3, n_expert, 5);
    Stats stats;
    auto cfg = basic_config(f, 16, &stats);
    cfg.queue_depth = 32;
    StreamingExpertSource src(std::move(cfg));
    // At layer 2 the top hint from one layer ahead is always right, the top
    // hint from two layers ahead never: only the latter stops being read.
    uint64_t issued_at_12 = 0;
    for (int round = 0; round < 24; ++round) {
        const int32_t right = int32_t(round % 20), wrong = int32_t(20 + round % 20);
        src.prefetch(2, std::vector<int32_t>{wrong}, 2);
        src.prefetch(2, std::vector<int32_t>{right}, 1);
        src.drain();
        visit_layer(src, f, 2, {right});
        if (round == 11) issued_at_12 = stats.prefetch_issued;
    }
    EXPECT_LT(issued_at_12, 24u) << "the wrong distance was never stopped";
    EXPECT_EQ(stats.prefetch_issued - issued_at_12, 12u) << "after round 12 only the right distance is read";
    EXPECT_EQ(stats.prefetch_useful, 24u);
    std::filesystem::remove_all(dir);
}

TEST(StreamingSource, TooSmallCacheIsAClearError) {
    const std::string dir = test::scratch_dir();
    ExpertFile f = make_expert_file(dir, 3, 6, 4);
    StreamingExpertSource src(basic_config(f, 4));
    const auto experts = iota_experts(6);
    try {
        src.begin_layer(0, experts);
        FAIL() << "no error";
    } catch (const Error &e) {
        EXPECT_EQ(e.status(), Status::out_of_memory);
        EXPECT_NE(std::string(e.what()).find("4 slots"), std::string::npos) << e.what();
    }
    std::filesystem::remove_all(dir);
}

// Reads that fail or come back short surface as Error(io) naming the layer,
// the expert and the errno, and the source keeps working afterwards.
// Every byte the device delivered is in the stats, also the bytes of an
// expert whose other part was cancelled, failed or came back short (then
// counted as wasted), and the bytes of the short read itself.
TEST(StreamingSource, BytesOfCancelledOrFailedReadsAreCounted) {
    const std::string dir = test::scratch_dir();
    ExpertFile f = make_expert_file(dir, 3, 6, 11);
    for (int errno_value : {ECANCELED, EIO, 0}) {  // 0: a short read
        SCOPED_TRACE(errno_value);
        Stats stats;
        auto cfg = basic_config(f, 6, &stats);
        cfg.queue_depth = 32;
        cfg.backend_override = std::make_unique<io::FaultInjectingBackend>(
            io::make_pread_backend(8), [errno_value](const io::ReadRequest &r, uint64_t seq) {
                io::Fault fault;
                if (seq == 1) {  // expert 0's up
                    fault.kind = errno_value ? io::Fault::Kind::error : io::Fault::Kind::short_read;
                    fault.error = errno_value;
                    fault.short_by = r.length - 1;  // one byte lands
                }
                return fault;
            });
        StreamingExpertSource src(std::move(cfg));
        const std::vector<int32_t> hint{0, 1};
        src.prefetch(0, hint);
        src.drain();
        const uint64_t delivered = src.observed_reads()->activity().bytes;
        ASSERT_GT(delivered, 0u);
        EXPECT_EQ(stats.bytes_read_prefetch + stats.bytes_read_demand, delivered);
        // Expert 0's gate and down landed, for nothing.
        EXPECT_GT(stats.bytes_read_wasted, 0u);
    }
    std::filesystem::remove_all(dir);
}

// A read carries at most 4 GiB: a larger expert matrix is refused at open,
// not read short.
TEST(StreamingSource, ExpertMatrixLargerThanOneReadIsUnsupported) {
    const std::string dir = test::scratch_dir();
    ExpertFile f = make_expert_file(dir, 3, 6, 12);
    auto cfg = basic_config(f, 1);
    ExpertMatrixLayout &down = cfg.layers[2].down;
    const uint64_t times = (uint64_t(1) << 32) / down.expert_stride + 1;
    down.rows *= int64_t(times);
    down.expert_stride *= times;
    ASSERT_GT(down.expert_bytes(), uint64_t(UINT32_MAX));
    try {
        StreamingExpertSource src(std::move(cfg));
        FAIL() << "opened";
    } catch (const Error &e) {
        EXPECT_EQ(e.status(), Status::unsupported) << e.what();
    }
    std::filesystem::remove_all(dir);
}

TEST(StreamingSource, FaultsNameLayerExpertErrnoAndLeaveSourceUsable) {
    const std::string dir = test::scratch_dir();
    ExpertFile f = make_expert_file(dir, 3, 6, 5);
    for (auto kind : {io::Fault::Kind::error, io::Fault::Kind::short_read}) {
        auto cfg = basic_config(f, 6);
        bool armed = true;
        auto fi = std::make_unique<io::FaultInjectingBackend>(io::make_pread_backend(8), [&](const io::ReadRequest &, uint64_t seq) {
            io::Fault fault;
            if (armed && seq == 4) {
                fault.kind = kind;
                fault.error = EIO;
                fault.short_by = 9000;  // more than the alignment padding
            }
            return fault;
        });
        cfg.backend_override = std::move(fi);
        StreamingExpertSource src(std::move(cfg));
        const auto experts = iota_experts(6);
        src.begin_layer(2, experts);
        bool threw = false;
        try {
            for (int i = 0; i < 6; ++i) src.next_ready();
        } catch (const Error &e) {
            threw = true;
            EXPECT_EQ(e.status(), Status::io);
            const std::string msg = e.what();
            EXPECT_NE(msg.find("layer 2"), std::string::npos) << msg;
            EXPECT_NE(msg.find("expert 1"), std::string::npos) << msg;  // read 4 = second expert's up
            if (kind == io::Fault::Kind::error)
                EXPECT_NE(msg.find("errno 5"), std::string::npos) << msg;
            else
                EXPECT_NE(msg.find("short read"), std::string::npos) << msg;
        }
        EXPECT_TRUE(threw);
        src.end_layer(2);
        armed = false;
        src.begin_layer(2, experts);
        std::set<int32_t> seen;
        for (int i = 0; i < 6; ++i) {
            ReadyExpert r = src.next_ready();
            expect_view(f, 2, r);
            seen.insert(r.expert);
        }
        src.end_layer(2);
        EXPECT_EQ(seen.size(), 6u);
    }
    std::filesystem::remove_all(dir);
}

// A prefetch the running layer came to wait for, whose read then fails (an
// errno, a short read, bytes that fail the packed checksum), is read again as
// a demand read: a failed prefetch never fails a layer by itself. Its bytes
// count once, as wasted prefetch bytes; the demand read's as demand bytes,
// and the expert as a miss.
TEST(StreamingSource, FailedPrefetchTheLayerWaitsForIsReadAgainOnDemand) {
    const std::string dir = test::scratch_dir();
    ExpertFile f = make_expert_file(dir, 3, 6, 13);
    const std::string packed = default_packed_path(f.path);
    write_packed_file(packed, f.fingerprint, f.layers, {f.path});
    struct Case {
        io::Fault::Kind kind;
        bool packed;
    };
    for (const Case c : {Case{io::Fault::Kind::error, false}, Case{io::Fault::Kind::short_read, false},
                         Case{io::Fault::Kind::error, true}, Case{io::Fault::Kind::corrupt, true}}) {
        SCOPED_TRACE(int(c.kind) * 2 + int(c.packed));
        Stats stats;
        auto cfg = basic_config(f, 6, &stats);
        if (c.packed) {
            cfg.packed_path = packed;
            cfg.verify_checksums = true;
        }
        uint64_t faults = 0;
        cfg.backend_override = std::make_unique<io::FaultInjectingBackend>(
            io::make_pread_backend(8), [&](const io::ReadRequest &r, uint64_t seq) {
                io::Fault fault;
                if (seq == 0) {  // the prefetch's (first) read
                    fault.kind = c.kind;
                    fault.short_by = 9000;  // more than the alignment padding
                    fault.corrupt_at = r.length / 2;
                    ++faults;
                }
                return fault;
            });
        StreamingExpertSource src(std::move(cfg));
        src.prefetch(2, std::vector<int32_t>{4});
        // Completions are taken by this thread only: the prefetch is still
        // loading when the layer asks for it, whatever the device has done.
        src.begin_layer(2, std::vector<int32_t>{4});
        ReadyExpert r;
        ASSERT_NO_THROW(r = src.next_ready());
        EXPECT_EQ(r.expert, 4);
        expect_view(f, 2, r);
        src.end_layer(2);
        EXPECT_EQ(faults, 1u);
        EXPECT_EQ(stats.prefetch_issued, 1u);
        // Not a hit, nor a useful prefetch, after all.
        EXPECT_EQ(stats.cache_hits, 0u);
        EXPECT_EQ(stats.cache_misses, 1u);
        EXPECT_EQ(stats.layer_misses[2], 1u);
        EXPECT_EQ(stats.prefetch_useful, 0u);
        EXPECT_EQ(stats.bytes_read_prefetch + stats.bytes_read_demand, src.observed_reads()->activity().bytes);
        EXPECT_EQ(stats.bytes_read_wasted, stats.bytes_read_prefetch);
        EXPECT_GT(stats.bytes_read_demand, 0u);
        EXPECT_EQ(src.resident_keys().size(), 1u);
    }
    std::filesystem::remove_all(dir);
}

// A filesystem that accepts O_DIRECT at open but refuses the reads (EINVAL,
// moving no bytes) falls back to buffered reads transparently: the experts'
// bytes are exact, and a refused read that was read again counts once, in
// the source's stats and in the observed reads alike.
TEST(StreamingSource, DirectReadRefusedFallsBackToBuffered) {
    const std::string dir = test::scratch_dir();
    ExpertFile f = make_expert_file(dir, 3, 6, 6);
    if (!io::ReadFile(f.path, true).direct()) GTEST_SKIP() << "no O_DIRECT on this filesystem";
    Stats stats;
    auto cfg = basic_config(f, 6, &stats);
    cfg.direct = true;
    auto refusing = std::make_unique<test::RefusingBackend>(io::make_pread_backend(8));
    const test::RefusingBackend *device = refusing.get();
    cfg.backend_override = std::move(refusing);
    StreamingExpertSource src(std::move(cfg));
    io::ObservedBackend &observed = *src.observed_reads();
    observed.start_log(64);
    visit_layer(src, f, 0, iota_experts(6));
    EXPECT_GT(device->refused, 0u);
    ASSERT_EQ(18u, observed.log().size());  // six experts of three matrices
    uint64_t bytes = 0;
    for (const io::LoggedRead &r : observed.log()) bytes += r.length;
    EXPECT_EQ(18u, observed.activity().reads);
    EXPECT_EQ(bytes, observed.activity().bytes);
    EXPECT_EQ(bytes, stats.bytes_read_demand);
    EXPECT_EQ(0u, stats.bytes_read_wasted);
    EXPECT_EQ(18u + device->refused, device->submitted.size());
    std::filesystem::remove_all(dir);
}

TEST(PackedFile, RoundTripVerifyAndCorruptionDetected) {
    const std::string dir = test::scratch_dir();
    ExpertFile f = make_expert_file(dir, 3, 5, 7);
    const std::string packed = default_packed_path(f.path);
    write_packed_file(packed, f.fingerprint, f.layers, {f.path});
    PackedVerifyReport ok = verify_packed_file(packed);
    EXPECT_EQ(ok.experts_checked, 10u);  // two layers with experts
    EXPECT_EQ(ok.bad_experts, 0u) << ok.first_problem;
    PackedFile pf = PackedFile::open(packed, f.fingerprint, f.layers);
    for (const auto &l : pf.layers()) {
        if (l.n_expert == 0) continue;
        EXPECT_EQ(l.first_extent % kPackedAlignment, 0u);
        EXPECT_EQ(l.extent_bytes % kPackedAlignment, 0u);
    }
    // Flip one payload byte of expert 3 of layer 2.
    const PackedLayer &l2 = pf.layers()[2];
    {
        std::fstream io(packed, std::ios::in | std::ios::out | std::ios::binary);
        const uint64_t at = l2.extent_of(3) + l2.up_offset + 17;
        io.seekg(std::streamoff(at));
        char c;
        io.get(c);
        io.seekp(std::streamoff(at));
        io.put(char(c ^ 0x40));
    }
    PackedVerifyReport bad = verify_packed_file(packed);
    EXPECT_EQ(bad.bad_experts, 1u);
    EXPECT_NE(bad.first_problem.find("expert 3 of layer 2"), std::string::npos) << bad.first_problem;

    // The streaming source with verification reports it as an I/O error.
    auto cfg = basic_config(f, 5);
    cfg.packed_path = packed;
    cfg.verify_checksums = true;
    StreamingExpertSource src(std::move(cfg));
    const auto experts = iota_experts(5);
    src.begin_layer(2, experts);
    try {
        for (int i = 0; i < 5; ++i) src.next_ready();
        FAIL() << "corruption not detected";
    } catch (const Error &e) {
        EXPECT_EQ(e.status(), Status::io);
        EXPECT_NE(std::string(e.what()).find("checksum"), std::string::npos) << e.what();
    }
    src.end_layer(2);
    std::filesystem::remove_all(dir);
}

TEST(PackedFile, FingerprintOrLayoutMismatchRejected) {
    const std::string dir = test::scratch_dir();
    ExpertFile f = make_expert_file(dir, 3, 5, 8);
    const std::string packed = default_packed_path(f.path);
    write_packed_file(packed, f.fingerprint, f.layers, {f.path});
    try {
        PackedFile::open(packed, f.fingerprint ^ 1, f.layers);
        FAIL();
    } catch (const Error &e) {
        EXPECT_EQ(e.status(), Status::bad_format);
        EXPECT_NE(std::string(e.what()).find("another model"), std::string::npos);
    }
    auto other = f.layers;
    other[0].up.rows += 1;
    other[0].up.expert_stride += 64 * 4;
    EXPECT_THROW(PackedFile::open(packed, f.fingerprint, other), Error);
    // A damaged file header is caught by its checksum.
    {
        std::fstream io(packed, std::ios::in | std::ios::out | std::ios::binary);
        io.seekp(60);
        io.put(char(0x7f));
    }
    EXPECT_THROW(PackedFile::open(packed, f.fingerprint, f.layers), Error);
    EXPECT_THROW(verify_packed_file(packed), Error);
    std::filesystem::remove_all(dir);
}

// open(2) of a named pipe for reading waits for a writer: a packed_path (or
// any file read through io::ReadFile) naming one must be refused at once.
TEST(PackedFile, APipeIsRejectedWithoutWaiting) {
    const std::string dir = test::scratch_dir();
    ExpertFile f = make_expert_file(dir, 3, 5, 8);
    const std::string path = dir + "/pipe.moepack";
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        alarm(5);
        try {
            PackedFile::open(path, f.fingerprint, f.layers);
        } catch (const Error &e) {
            _exit(e.status() == Status::io && std::string(e.what()).find("not a regular file") != std::string::npos
                      ? 0
                      : 1);
        }
        _exit(2);
    }
    EXPECT_EQ(moe::test::wait_exit_code(pid), 0);
    std::filesystem::remove_all(dir);
}

// The packed file is renamed over its output path at the end: an output that
// is the model itself (by its name or another link to it) would replace the
// model with the packed file.
TEST(PackedFile, OutputThatIsTheModelIsRefused) {
    const std::string dir = test::scratch_dir();
    ExpertFile f = make_expert_file(dir, 3, 5, 10);
    const std::string link = dir + "/hard-link.bin";
    std::filesystem::create_hard_link(f.path, link);
    for (const std::string &out : {f.path, link}) {
        SCOPED_TRACE(out);
        try {
            write_packed_file(out, f.fingerprint, f.layers, {f.path});
            FAIL() << "wrote over the model";
        } catch (const Error &e) {
            EXPECT_EQ(e.status(), Status::invalid_argument) << e.what();
            EXPECT_NE(std::string(e.what()).find(f.path), std::string::npos) << e.what();
        }
        std::ifstream in(f.path, std::ios::binary);
        const std::vector<uint8_t> now((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        EXPECT_TRUE(now == f.bytes);
    }
    std::filesystem::remove_all(dir);
}

// The fingerprint covers the model's header, not its tensor data: a model
// rewritten with other weights of the same shapes keeps it. Verifying against
// the model compares every expert; the sample open takes catches a model
// whose experts all changed.
TEST(PackedFile, SidecarOfOtherWeightsWithTheSameHeaderIsCaught) {
    const std::string dir = test::scratch_dir();
    ExpertFile f = make_expert_file(dir, 3, 5, 11);
    const std::string packed = default_packed_path(f.path);
    write_packed_file(packed, f.fingerprint, f.layers, {f.path});
    const std::vector<std::string> shards{f.path};
    const ModelExperts model{f.layers, shards};
    PackedFile pf = PackedFile::open(packed, f.fingerprint, f.layers);
    EXPECT_EQ(verify_packed_file(packed, &model).bad_experts, 0u);
    EXPECT_EQ(packed_sample_mismatch(pf, model), "");

    // One byte of expert 2 of layer 2 changes in the model.
    const auto rewrite_model = [&](uint64_t at) {
        std::fstream io(f.path, std::ios::in | std::ios::out | std::ios::binary);
        io.seekp(std::streamoff(at));
        io.put(char(f.bytes[at] ^ 0x01));
    };
    rewrite_model(f.layers[2].down.file_offset + 2 * f.layers[2].down.expert_stride + 9);
    EXPECT_EQ(verify_packed_file(packed).bad_experts, 0u);  // intact in itself
    const PackedVerifyReport r = verify_packed_file(packed, &model);
    EXPECT_EQ(r.bad_experts, 1u);
    EXPECT_NE(r.first_problem.find("expert 2 of layer 2 differs from the model"), std::string::npos)
        << r.first_problem;

    // Every expert changes (the model regenerated with another seed).
    for (const ExpertLayerLayout &L : f.layers)
        for (int32_t x = 0; x < L.n_expert; ++x) rewrite_model(L.up.file_offset + uint64_t(x) * L.up.expert_stride);
    EXPECT_EQ(verify_packed_file(packed, &model).bad_experts, 10u);
    const std::string why = packed_sample_mismatch(pf, model);
    EXPECT_NE(why.find("expert 0 of layer 0 differs"), std::string::npos) << why;
    std::filesystem::remove_all(dir);
}

// Rewrites one 64-bit field of a layer's table entry and re-seals the header
// checksum, as someone crafting a file would (the checksum guards against
// damage, not against intent).
void rewrite_layer_field(const std::string &packed, uint32_t n_layer, uint32_t layer, uint64_t field_offset,
                         uint64_t value) {
    constexpr uint64_t kFileHeader = 48, kEntry = 136, kChecksumAt = 40;
    std::vector<char> table(kFileHeader + n_layer * kEntry);
    std::fstream io(packed, std::ios::in | std::ios::out | std::ios::binary);
    io.read(table.data(), std::streamsize(table.size()));
    std::memcpy(table.data() + kFileHeader + layer * kEntry + field_offset, &value, sizeof value);
    std::memset(table.data() + kChecksumAt, 0, 8);
    const uint64_t sum = XXH3_64bits(table.data(), table.size());
    std::memcpy(table.data() + kChecksumAt, &sum, 8);
    io.seekp(0);
    io.write(table.data(), std::streamsize(table.size()));
}

TEST(PackedFile, CraftedLayerTableRejected) {
    const std::string dir = test::scratch_dir();
    ExpertFile f = make_expert_file(dir, 3, 5, 9);
    const std::string packed = default_packed_path(f.path);
    // Entry fields: first_extent at 8, extent_bytes at 16, offset[3] at 24, bytes[3] at 48.
    write_packed_file(packed, f.fingerprint, f.layers, {f.path});
    const PackedLayer good = PackedFile::open(packed, f.fingerprint, f.layers).layers()[2];
    struct Case {
        const char *what;
        uint64_t field, value;
        bool verify_rejects;  // also unsafe without the model's layout at hand
    };
    const Case cases[] = {
        {"up matrix far outside the extent", 32, uint64_t(1) << 42, true},
        {"down offset whose end wraps past 2^64", 40, ~uint64_t(0) - 4351, true},
        {"extent size whose span wraps past 2^64", 16, uint64_t(1) << 62, true},
        {"first extent past the end of the file", 8, uint64_t(1) << 40, true},
        {"gate overlapping the expert header", 24, 64, true},
        {"extents moved onto the previous layer's", 8, good.first_extent - kPackedAlignment, false},
    };
    for (const Case &c : cases) {
        SCOPED_TRACE(c.what);
        write_packed_file(packed, f.fingerprint, f.layers, {f.path});
        rewrite_layer_field(packed, 3, 2, c.field, c.value);
        try {
            PackedFile::open(packed, f.fingerprint, f.layers);
            FAIL() << "opened";
        } catch (const Error &e) {
            EXPECT_EQ(e.status(), Status::bad_format) << e.what();
            EXPECT_NE(std::string(e.what()).find("layer 2"), std::string::npos) << e.what();
        }
        if (c.verify_rejects) {
            EXPECT_THROW(verify_packed_file(packed), Error);
        } else {
            // In bounds, but the extents found there belong to other experts: each is reported.
            const PackedVerifyReport r = verify_packed_file(packed);
            EXPECT_EQ(r.bad_experts, 5u) << r.first_problem;
        }
    }
    std::filesystem::remove_all(dir);
}

}  // namespace

// A profile path that names a pipe (planted beside the model, or given) is
// no profile: opening it for reading would wait for a writer forever and
// hang moestream_open. Checked in a child with an alarm, so a hang fails.
TEST(UsageProfileFile, APipeIsRejectedWithoutWaiting) {
    const std::string dir = test::scratch_dir();
    const std::string path = dir + "/pipe.moeusage";
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        alarm(5);
        std::string why;
        const auto p = load_usage_profile(path, 1, 1, 4, &why);
        _exit(!p && why.find("not a plain file") != std::string::npos ? 0 : 1);
    }
    EXPECT_EQ(moe::test::wait_exit_code(pid), 0);
    std::filesystem::remove_all(dir);
}
