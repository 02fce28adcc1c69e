// The mmap expert source's advise/release bookkeeping, observed through a
// recording advisor: which slices are advised WILLNEED after routing, which
// experts are released when the working set outgrows its share, and that the
// experts in use are never among them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "common/mapped_file.hpp"
#include "experts/mmap_expert_source.hpp"
#include "experts/resident_expert_source.hpp"
#include "support/paths.hpp"

namespace {

using namespace moe;

struct Call {
    bool need;
    const uint8_t *data;
    uint64_t length;
};

class RecordingAdvisor final : public MemoryAdvisor {
public:
    explicit RecordingAdvisor(std::vector<Call> *log) : log_(log) {}
    const char *name() const override { return "recording"; }
    void will_need(const uint8_t *d, uint64_t n) override { log_->push_back(Call{true, d, n}); }
    void release(const uint8_t *d, uint64_t n) override { log_->push_back(Call{false, d, n}); }

private:
    std::vector<Call> *log_;
};

constexpr int32_t kLayers = 2, kExperts = 4;
constexpr uint64_t kGate = 96, kUp = 96, kDown = 128, kPerExpert = kGate + kUp + kDown;

class MmapSource : public ::testing::Test {
protected:
    MmapSource() : bytes_(kLayers * kExperts * kPerExpert + 512) {}

    std::vector<ExpertLayerLayout> layouts() {
        std::vector<ExpertLayerLayout> out(kLayers);
        uint8_t *p = bytes_.data();
        for (ExpertLayerLayout &l : out) {
            l.n_expert = kExperts;
            for (auto [m, stride] : {std::pair{&l.gate, kGate}, std::pair{&l.up, kUp}, std::pair{&l.down, kDown}}) {
                m->rows = 1;
                m->cols = int64_t(stride);
                m->expert_stride = stride;
                m->mapped = p;
                p += stride * kExperts;
            }
        }
        return out;
    }
    std::unique_ptr<MmapExpertSource> make(uint64_t share_experts, Stats *stats = nullptr, uint64_t reach = 0,
                                           std::unique_ptr<MemoryPressure> pressure = nullptr) {
        MmapSourceConfig cfg;
        cfg.pressure = std::move(pressure);
        cfg.layers = layouts();
        cfg.expert_share_bytes = share_experts * kPerExpert;
        cfg.neighbour_reach_bytes = reach;
        cfg.dense = {MappedRange{bytes_.data() + bytes_.size() - 512, 512}};
        cfg.advisor = std::make_unique<RecordingAdvisor>(&calls_);
        cfg.stats = stats;
        return std::make_unique<MmapExpertSource>(std::move(cfg));
    }
    // The three slices of (layer, expert) as advised ranges.
    std::vector<Call> slices(int32_t layer, int32_t e, bool need) {
        const ExpertLayerLayout l = layouts()[size_t(layer)];
        std::vector<Call> out;
        for (const ExpertMatrixLayout *m : {&l.gate, &l.up, &l.down})
            out.push_back(Call{need, m->mapped + uint64_t(e) * m->expert_stride, m->expert_stride});
        return out;
    }
    // Calls recorded since the last take().
    std::vector<Call> take() {
        std::vector<Call> out(calls_.begin() + long(seen_), calls_.end());
        seen_ = calls_.size();
        return out;
    }
    void run_layer(MmapExpertSource &s, int32_t layer, std::vector<int32_t> experts) {
        s.begin_layer(layer, experts);
        for (int32_t e : experts) {
            const ReadyExpert r = s.next_ready();
            EXPECT_EQ(r.expert, e);
            EXPECT_EQ(r.view.up, layouts()[size_t(layer)].up.mapped + uint64_t(e) * kUp);
        }
        s.end_layer(layer);
    }

    std::vector<uint8_t> bytes_;
    std::vector<Call> calls_;
    size_t seen_ = 0;
};

bool same(const std::vector<Call> &a, const std::vector<Call> &b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i].need != b[i].need || a[i].data != b[i].data || a[i].length != b[i].length) return false;
    return true;
}

std::vector<Call> concat(std::initializer_list<std::vector<Call>> parts) {
    std::vector<Call> out;
    for (const auto &p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
}

TEST_F(MmapSource, DenseWeightsAreAdvisedOnceAtOpen) {
    auto s = make(3);
    const auto c = take();
    ASSERT_EQ(c.size(), 1u);
    EXPECT_TRUE(c[0].need);
    EXPECT_EQ(c[0].data, bytes_.data() + bytes_.size() - 512);
    EXPECT_EQ(c[0].length, 512u);
    EXPECT_EQ(s->counters().dense_bytes_advised, 512u);
    run_layer(*s, 0, {0, 1, 2});
    for (const Call &call : take()) EXPECT_NE(call.data, bytes_.data() + bytes_.size() - 512);
}

TEST_F(MmapSource, RoutedExpertsAreAdvisedOnceAndHitsCounted) {
    Stats stats;
    auto s = make(8, &stats);
    take();
    run_layer(*s, 0, {2, 0});
    EXPECT_TRUE(same(take(), concat({slices(0, 2, true), slices(0, 0, true)})));
    EXPECT_EQ(s->counters().misses, 2u);
    EXPECT_EQ(s->counters().bytes_advised, 2 * kPerExpert);
    // Routed again: no hint, counted as hits.
    run_layer(*s, 0, {0, 2, 3});
    EXPECT_TRUE(same(take(), slices(0, 3, true)));
    EXPECT_EQ(s->counters().hits, 2u);
    EXPECT_EQ(s->counters().misses, 3u);
    EXPECT_EQ(s->counters().evictions, 0u);
    EXPECT_EQ(s->tracked_bytes(), 3 * kPerExpert);
    EXPECT_EQ(stats.cache_hits, 2u);
    EXPECT_EQ(stats.cache_misses, 3u);
    EXPECT_EQ(stats.layer_hits[0], 2u);
    EXPECT_EQ(stats.layer_misses[0], 3u);
    EXPECT_EQ(stats.bytes_read_demand, 3 * kPerExpert);
}

TEST_F(MmapSource, LeastRecentlyUsedExpertsAreReleasedBeyondTheShare) {
    Stats stats;
    auto s = make(3, &stats);
    take();
    run_layer(*s, 0, {0, 1});
    run_layer(*s, 1, {3});
    take();
    run_layer(*s, 0, {1});  // hit; layer 0 expert 0 is now the least recent
    EXPECT_TRUE(take().empty());
    run_layer(*s, 1, {2});  // 4 experts > share of 3: release (0, 0), then advise (1, 2)
    EXPECT_TRUE(same(take(), concat({slices(0, 0, false), slices(1, 2, true)})));
    EXPECT_FALSE(s->is_tracked(0, 0));
    EXPECT_TRUE(s->is_tracked(0, 1));
    EXPECT_TRUE(s->is_tracked(1, 3));
    EXPECT_EQ(s->tracked_bytes(), 3 * kPerExpert);
    EXPECT_EQ(s->counters().evictions, 1u);
    EXPECT_EQ(stats.evictions, 1u);
    // The released expert comes back as a miss.
    run_layer(*s, 0, {0});
    EXPECT_TRUE(same(take(), concat({slices(1, 3, false), slices(0, 0, true)})));
    EXPECT_LE(s->tracked_bytes(), 3 * kPerExpert);
}

TEST_F(MmapSource, ExpertsInUseAreNeverReleased) {
    auto s = make(2);
    take();
    run_layer(*s, 1, {0});
    take();
    // Four experts of one layer exceed a share of two: only the old one goes,
    // the open layer's stay tracked until the next layer makes room.
    s->begin_layer(0, std::vector<int32_t>{0, 1, 2, 3});
    const auto c = take();
    for (const Call &call : c)
        if (!call.need) EXPECT_TRUE(call.data == slices(1, 0, false)[0].data || call.data == slices(1, 0, false)[1].data ||
                                    call.data == slices(1, 0, false)[2].data);
    EXPECT_EQ(std::count_if(c.begin(), c.end(), [](const Call &x) { return !x.need; }), 3);
    for (int e = 0; e < 4; ++e) EXPECT_TRUE(s->is_tracked(0, e));
    EXPECT_EQ(s->tracked_bytes(), 4 * kPerExpert);
    for (int i = 0; i < 4; ++i) s->next_ready();
    s->end_layer(0);
    run_layer(*s, 1, {1});
    EXPECT_EQ(s->tracked_bytes(), 2 * kPerExpert);
    EXPECT_TRUE(s->is_tracked(1, 1));
}

TEST_F(MmapSource, PrefetchAdvisesOnlyWhatFitsBesideTheExpertsInUse) {
    Stats stats;
    auto s = make(3, &stats);
    take();
    s->begin_layer(0, std::vector<int32_t>{0, 1});
    take();
    s->prefetch(1, std::vector<int32_t>{2, 3});  // only one fits beside the two in use
    EXPECT_TRUE(same(take(), slices(1, 2, true)));
    EXPECT_EQ(stats.prefetch_issued, 1u);
    EXPECT_EQ(stats.bytes_read_prefetch, kPerExpert);
    s->prefetch(0, std::vector<int32_t>{0});  // tracked already: nothing to do
    EXPECT_TRUE(take().empty());
    s->next_ready();
    s->next_ready();
    s->end_layer(0);
    run_layer(*s, 1, {2});
    EXPECT_EQ(stats.prefetch_useful, 1u);
    EXPECT_EQ(stats.cache_hits, 1u);
    EXPECT_TRUE(take().empty());
}

TEST_F(MmapSource, PrefetchedButUnusedBytesCountAsWastedWhenReleased) {
    Stats stats;
    auto s = make(2, &stats);
    s->prefetch(1, std::vector<int32_t>{3});
    run_layer(*s, 0, {0, 1});  // releases the unused prefetch
    EXPECT_FALSE(s->is_tracked(1, 3));
    EXPECT_EQ(stats.bytes_read_wasted, kPerExpert);
    EXPECT_EQ(stats.prefetch_useful, 0u);
}

TEST_F(MmapSource, NoShareMeansNothingIsEverReleased) {
    auto s = make(0);
    for (int round = 0; round < 3; ++round)
        for (int32_t l = 0; l < kLayers; ++l) run_layer(*s, l, {0, 1, 2, 3});
    for (const Call &c : take()) EXPECT_TRUE(c.need);
    EXPECT_EQ(s->counters().evictions, 0u);
    EXPECT_EQ(s->counters().misses, uint64_t(kLayers * kExperts));
    EXPECT_EQ(s->counters().hits, uint64_t(2 * kLayers * kExperts));
}

TEST_F(MmapSource, UntrackedNeighboursOfAComputedExpertAreReleased) {
    // Reach of one gate/up slice (96 bytes): experts e-1 and e+1 of each
    // matrix (down slices are 128 bytes: also one).
    auto s = make(8, nullptr, 96);
    take();
    run_layer(*s, 0, {0});  // advises (0, 0), then releases its neighbour 1 in each matrix
    EXPECT_EQ(take().size(), 6u);
    const uint64_t before = s->counters().neighbour_releases;
    s->begin_layer(0, std::vector<int32_t>{2});
    take();
    s->next_ready();
    EXPECT_TRUE(take().empty());  // released only when the layer is done
    s->end_layer(0);              // (0, 2) computed: release 1 and 3, never the tracked 0
    const auto c = take();
    ASSERT_EQ(c.size(), 6u);  // per matrix: expert 1, expert 3 (not adjacent: two runs)
    const ExpertLayerLayout l = layouts()[0];
    size_t i = 0;
    for (const ExpertMatrixLayout *m : {&l.gate, &l.up, &l.down})
        for (int32_t e : {1, 3}) {
            EXPECT_FALSE(c[i].need);
            EXPECT_EQ(c[i].data, m->mapped + uint64_t(e) * m->expert_stride) << i;
            EXPECT_EQ(c[i].length, m->expert_stride) << i;
            ++i;
        }
    EXPECT_TRUE(s->is_tracked(0, 0));
    EXPECT_TRUE(s->is_tracked(0, 2));
    EXPECT_EQ(s->counters().neighbour_releases - before, 6u);
    EXPECT_EQ(s->counters().evictions, 0u);  // not evictions: they were never tracked

    // Adjacent untracked experts are released as one run, once the layer ends.
    auto w = make(8, nullptr, 3 * 128);
    w->begin_layer(1, std::vector<int32_t>{0, 3});
    w->next_ready();
    w->next_ready();
    take();
    w->end_layer(1);  // around 0: 1 and 2 (3 is in use); around 3: the same run
    const auto d = take();
    ASSERT_EQ(d.size(), 6u);
    EXPECT_EQ(d[0].data, layouts()[1].gate.mapped + kGate);
    EXPECT_EQ(d[0].length, 2 * kGate);
}

TEST_F(MmapSource, WithoutAShareNeighboursAreNeverReleased) {
    // Everything may stay resident: the pages a fault mapped stay mapped.
    auto s = make(0, nullptr, 3 * 128);
    for (int round = 0; round < 2; ++round)
        for (int32_t l = 0; l < kLayers; ++l) run_layer(*s, l, {1});
    for (const Call &c : take()) EXPECT_TRUE(c.need);
    EXPECT_EQ(s->counters().neighbour_releases, 0u);
    EXPECT_EQ(s->counters().evictions, 0u);
}

TEST_F(MmapSource, MisuseIsAnInternalError) {
    auto s = make(3);
    EXPECT_THROW(s->begin_layer(5, std::vector<int32_t>{0}), std::exception);
    EXPECT_THROW(s->begin_layer(0, std::vector<int32_t>{7}), std::exception);
    EXPECT_THROW(s->next_ready(), std::exception);
    s->begin_layer(0, std::vector<int32_t>{1});
    EXPECT_THROW(s->begin_layer(1, std::vector<int32_t>{1}), std::exception);
    EXPECT_THROW(s->end_layer(1), std::exception);
    s->next_ready();
    EXPECT_THROW(s->next_ready(), std::exception);
    s->end_layer(0);
}

TEST_F(MmapSource, ResidentSourceServesTheSameViewsAndRejectsTheSameMisuse) {
    // Both sources hand out the experts of the open layer from the mapping,
    // in request order, through the same queue.
    auto mapped = make(8);
    Stats stats;
    ResidentExpertSource resident(layouts(), &stats);
    const std::vector<int32_t> request{3, 0, 2};
    mapped->begin_layer(1, request);
    resident.begin_layer(1, request);
    for (int32_t e : request) {
        const ReadyExpert a = mapped->next_ready(), b = resident.next_ready();
        EXPECT_EQ(a.expert, e);
        EXPECT_EQ(b.expert, e);
        EXPECT_EQ(a.view.gate, b.view.gate);
        EXPECT_EQ(a.view.up, b.view.up);
        EXPECT_EQ(a.view.down, b.view.down);
        EXPECT_EQ(b.view.down, layouts()[1].down.mapped + uint64_t(e) * kDown);
    }
    EXPECT_THROW(resident.next_ready(), std::exception);
    EXPECT_THROW(resident.begin_layer(0, std::vector<int32_t>{1}), std::exception);
    EXPECT_THROW(resident.end_layer(0), std::exception);
    mapped->end_layer(1);
    resident.end_layer(1);
    EXPECT_EQ(stats.cache_hits, request.size());
    EXPECT_EQ(stats.layer_hits[1], request.size());

    EXPECT_THROW(resident.begin_layer(kLayers, std::vector<int32_t>{0}), std::exception);
    EXPECT_THROW(resident.begin_layer(0, std::vector<int32_t>{kExperts}), std::exception);
    EXPECT_THROW(resident.next_ready(), std::exception);
    resident.begin_layer(0, std::vector<int32_t>{1});  // the failed calls left nothing open
    resident.end_layer(0);
}

// Stall shares handed out in order (then "unreadable"); the memory available
// is whatever *available holds at the time (unknown without one).
class ScriptedPressure final : public MemoryPressure {
public:
    explicit ScriptedPressure(std::vector<double> shares, const std::optional<uint64_t> *available = nullptr)
        : shares_(std::move(shares)), available_(available) {}
    const char *name() const override { return "scripted"; }
    double stall_share() override { return next_ < shares_.size() ? shares_[next_++] : -1; }
    std::optional<uint64_t> available_bytes() override { return available_ ? *available_ : std::nullopt; }

private:
    std::vector<double> shares_;
    const std::optional<uint64_t> *available_;
    size_t next_ = 0;
};

// Experts released by the calls (gate slice of each release of a whole expert).
std::vector<std::pair<int32_t, int32_t>> released_experts(const std::vector<Call> &calls, const uint8_t *base) {
    std::vector<std::pair<int32_t, int32_t>> out;
    for (const Call &c : calls) {
        const uint64_t off = uint64_t(c.data - base);
        const uint64_t layer = off / (kExperts * kPerExpert), in_layer = off - layer * kExperts * kPerExpert;
        if (c.need || c.length != kGate || in_layer >= kExperts * kGate) continue;  // gate slices only
        out.emplace_back(int32_t(layer), int32_t(in_layer / kGate));
    }
    return out;
}

// What the fixture's source may keep without a share: every expert and the
// 512 dense bytes; memory below this plus a sixteenth is short of it.
constexpr uint64_t kNeedAll = kLayers * kExperts * kPerExpert + 512;
constexpr uint64_t with_spare(uint64_t need) { return need + need / 16; }

TEST_F(MmapSource, MemoryPressureReleasesLeastRecentExpertsAndTheLimitRecovers) {
    // Polled at each step's first layer: calm, stalled three times, then calm
    // for as long as the limit needs to grow back. The available memory is
    // unknown, so persistent stalls alone count as pressure.
    std::vector<double> shares = {0.0, 0.5, 0.5, 0.3};
    for (int i = 0; i < 9; ++i) shares.push_back(0.001);
    auto s = make(8, nullptr, 0, std::make_unique<ScriptedPressure>(shares));
    take();
    run_layer(*s, 0, {0, 1, 2, 3});  // poll 1: calm
    run_layer(*s, 1, {0, 1, 2, 3});  // no poll beyond layer 0
    EXPECT_EQ(s->counters().pressure_polls, 1u);
    EXPECT_EQ(s->tracked_bytes(), 8 * kPerExpert);
    take();

    // Poll 2 (stalled half the time): the first stalled poll in a row is not
    // pressure yet.
    run_layer(*s, 0, {0});
    EXPECT_EQ(s->counters().pressure_events, 0u);
    EXPECT_TRUE(released_experts(take(), bytes_.data()).empty());

    // Poll 3, stalled again: an eighth of the 8 experts goes, the least
    // recently used (layer 0 expert 1, expert 0 was just used); the step's
    // own experts are then tracked again as hits or misses.
    run_layer(*s, 0, {3, 2});
    EXPECT_EQ(s->counters().pressure_events, 1u);
    EXPECT_EQ(s->pressure_limit_bytes(), 7 * kPerExpert);
    EXPECT_EQ(s->counters().bytes_released_under_pressure, kPerExpert);
    const auto first = released_experts(take(), bytes_.data());
    ASSERT_EQ(first.size(), 1u);
    EXPECT_EQ(first[0], std::make_pair(0, 1));
    EXPECT_LE(s->tracked_bytes(), 7 * kPerExpert);

    // Poll 4, still stalled: an eighth of what is held now goes as well.
    run_layer(*s, 0, {3});
    EXPECT_EQ(s->counters().pressure_events, 2u);
    EXPECT_LT(s->pressure_limit_bytes(), 7 * kPerExpert);
    const auto second = released_experts(take(), bytes_.data());
    ASSERT_FALSE(second.empty());
    for (const auto &[layer, e] : second) EXPECT_FALSE(layer == 0 && e == 3) << "released the expert in use";
    EXPECT_LE(s->tracked_bytes(), s->pressure_limit_bytes());

    // Calm polls (stall under 2%): the limit grows by an eighth of the share
    // per poll and is lifted once it reaches the share.
    uint64_t previous = s->pressure_limit_bytes();
    for (int i = 0; i < 9 && s->pressure_limit_bytes() != 0; ++i) {
        run_layer(*s, 0, {3});
        if (s->pressure_limit_bytes() != 0) EXPECT_GT(s->pressure_limit_bytes(), previous);
        previous = s->pressure_limit_bytes();
    }
    EXPECT_EQ(s->pressure_limit_bytes(), 0u);
    EXPECT_EQ(s->counters().pressure_events, 2u);
    EXPECT_EQ(s->counters().pressure_stalls_with_room, 0u);
    // Unreadable signal from now on: nothing changes.
    run_layer(*s, 0, {0, 1, 2, 3});
    run_layer(*s, 1, {0, 1, 2, 3});
    EXPECT_EQ(s->tracked_bytes(), 8 * kPerExpert);
}

TEST_F(MmapSource, MemoryPressureLimitsEvenWithoutAShare) {
    // No share: everything may stay, until tasks stall on memory.
    auto s = make(0, nullptr, 0, std::make_unique<ScriptedPressure>(std::vector<double>{0.0, 1.0, 1.0}));
    run_layer(*s, 0, {0, 1, 2, 3});
    run_layer(*s, 1, {0, 1, 2, 3});
    run_layer(*s, 0, {1});  // poll 2: the first stalled one
    EXPECT_EQ(s->tracked_bytes(), 8 * kPerExpert);
    take();
    run_layer(*s, 0, {1});  // poll 3: stalled in a row
    EXPECT_EQ(s->pressure_limit_bytes(), 7 * kPerExpert);
    EXPECT_EQ(released_experts(take(), bytes_.data()).size(), 1u);
    EXPECT_LE(s->tracked_bytes(), 7 * kPerExpert);
}

TEST_F(MmapSource, MemoryPressureIgnoresASingleStalledPoll) {
    // A stalled window between calm ones (a compaction, another process's
    // burst) is noise: nothing is released, whatever memory is left.
    const std::optional<uint64_t> scarce = 0;
    auto s = make(0, nullptr, 0,
                  std::make_unique<ScriptedPressure>(std::vector<double>{0.0, 0.9, 0.0, 0.9, 0.0, 0.9}, &scarce));
    for (int step = 0; step < 6; ++step) {
        run_layer(*s, 0, {0, 1, 2, 3});
        run_layer(*s, 1, {0, 1, 2, 3});
    }
    EXPECT_EQ(s->counters().pressure_polls, 6u);
    EXPECT_EQ(s->counters().pressure_events, 0u);
    EXPECT_EQ(s->counters().evictions, 0u);
    EXPECT_EQ(s->pressure_limit_bytes(), 0u);
    EXPECT_EQ(s->tracked_bytes(), 8 * kPerExpert);
}

TEST_F(MmapSource, MemoryPressureKeepsWhatFitsWithRoomToSpare) {
    // Stalls in every window, but the memory available holds all experts and
    // the dense weights with a sixteenth to spare: the stalls are someone
    // else's or our own page-cache filling, and nothing is released. Once the
    // memory available falls short of that by a byte, they are pressure.
    std::optional<uint64_t> available = with_spare(kNeedAll);
    auto s = make(0, nullptr, 0, std::make_unique<ScriptedPressure>(std::vector<double>(8, 0.5), &available));
    for (int step = 0; step < 5; ++step) {
        run_layer(*s, 0, {0, 1, 2, 3});
        run_layer(*s, 1, {0, 1, 2, 3});
    }
    EXPECT_EQ(s->counters().pressure_polls, 5u);
    EXPECT_EQ(s->counters().pressure_events, 0u);
    EXPECT_EQ(s->counters().pressure_stalls_with_room, 4u);  // every poll from the second one in a row
    EXPECT_EQ(s->counters().evictions, 0u);
    EXPECT_EQ(s->tracked_bytes(), 8 * kPerExpert);

    available = with_spare(kNeedAll) - 1;
    take();
    run_layer(*s, 0, {3});  // the least recently used, (0, 0), goes
    EXPECT_EQ(s->counters().pressure_events, 1u);
    EXPECT_EQ(s->pressure_limit_bytes(), 7 * kPerExpert);
    EXPECT_EQ(released_experts(take(), bytes_.data()), (std::vector<std::pair<int32_t, int32_t>>{{0, 0}}));

    // Memory to spare again, exactly (the other process exited), while the
    // stalls go on: what the reaction itself released does not count as
    // need, so the limit grows back instead of falling further.
    available = with_spare(kNeedAll);
    const uint64_t lowered = s->pressure_limit_bytes();
    run_layer(*s, 0, {3});  // a hit: nothing released to stay within the limit
    EXPECT_EQ(s->counters().pressure_events, 1u);
    EXPECT_EQ(s->counters().pressure_stalls_with_room, 5u);
    EXPECT_TRUE(s->pressure_limit_bytes() == 0 || s->pressure_limit_bytes() > lowered);
}

TEST_F(MmapSource, MemoryPressureCountsTheExpertsStreamedOutSinceThePreviousPoll) {
    // A share of 4 experts, each step routing 4 of layer 0 and then 4 of
    // layer 1: every layer releases the other's 4 experts, 8 a step, which
    // stay in the page cache until the kernel reclaims them. Memory for the
    // share and the dense weights alone is not room to spare.
    constexpr uint64_t kKeep = 4 * kPerExpert + 512, kStreamed = 8 * kPerExpert;
    std::optional<uint64_t> available = with_spare(kKeep + kStreamed);
    auto s = make(4, nullptr, 0, std::make_unique<ScriptedPressure>(std::vector<double>(8, 0.5), &available));
    auto step = [&] {
        run_layer(*s, 0, {0, 1, 2, 3});
        run_layer(*s, 1, {0, 1, 2, 3});
    };
    step();  // poll 1: the first stalled one
    step();  // poll 2: step 1 released layer 0's 4 experts only
    step();  // poll 3: a whole step's 8
    EXPECT_EQ(s->counters().pressure_events, 0u);
    EXPECT_EQ(s->counters().pressure_stalls_with_room, 2u);
    available = with_spare(kKeep + kStreamed) - 1;
    step();
    EXPECT_EQ(s->counters().pressure_events, 1u);
    EXPECT_EQ(s->pressure_limit_bytes(), 4 * kPerExpert - kPerExpert / 2);
}

TEST_F(MmapSource, MemoryPressureMeasuresRoomAgainstTheShare) {
    // With a share of 4 experts, what the source may keep is the share and the
    // dense weights, not the whole model: memory for that with room to spare
    // is enough even though all experts would not fit.
    constexpr uint64_t kNeedShare = 4 * kPerExpert + 512;
    std::optional<uint64_t> available = with_spare(kNeedShare);
    ASSERT_LT(*available, kNeedAll);
    auto s = make(4, nullptr, 0, std::make_unique<ScriptedPressure>(std::vector<double>(4, 0.5), &available));
    run_layer(*s, 0, {0, 1, 2, 3});
    run_layer(*s, 0, {0, 1, 2, 3});
    EXPECT_EQ(s->counters().pressure_events, 0u);
    EXPECT_EQ(s->counters().pressure_stalls_with_room, 1u);
    available = kNeedShare;
    run_layer(*s, 0, {0, 1, 2, 3});
    EXPECT_EQ(s->counters().pressure_events, 1u);
    EXPECT_EQ(s->pressure_limit_bytes(), 4 * kPerExpert - kPerExpert / 2);
}

TEST(MemoryPressureSignal, ParsesTheSomeLineOfAPressureFile) {
    EXPECT_EQ(psi_some_total_us("some avg10=0.00 avg60=0.00 avg300=0.00 total=136148674\n"
                                "full avg10=0.00 avg60=0.00 avg300=0.00 total=34344313\n"),
              136148674);
    EXPECT_EQ(psi_some_total_us("full avg10=1.00 avg60=0.00 avg300=0.00 total=5\nsome avg10=2.00 total=77"), 77);
    EXPECT_EQ(psi_some_total_us("full avg10=0.00 avg60=0.00 avg300=0.00 total=5\n"), -1);
    EXPECT_EQ(psi_some_total_us("some avg10=0.00 avg60=0.00 avg300=0.00\n"), -1);
    EXPECT_EQ(psi_some_total_us("some total=\n"), -1);
    EXPECT_EQ(psi_some_total_us(""), -1);
}

TEST(MemoryPressureSignal, PsiFileSharesFollowTheFilesTotal) {
#if !defined(__linux__)
    GTEST_SKIP() << "pressure-stall files are Linux's";
#endif
    const std::string dir = test::scratch_dir();
    const std::string path = dir + "/memory.pressure";
    auto write = [&](const std::string &file, const std::string &some_total) {
        std::ofstream out(file, std::ios::trunc);
        out << "some avg10=0.00 avg60=0.00 avg300=0.00 total=" << some_total
            << "\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=5\n";
    };
    EXPECT_EQ(make_psi_memory_pressure(path), nullptr);  // no file yet
    write(path, "");
    EXPECT_EQ(make_psi_memory_pressure(path), nullptr);  // no total on the "some" line

    write(path, "1000");
    auto p = make_psi_memory_pressure(path);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(std::string(p->name()), "psi");
    EXPECT_EQ(p->stall_share(), 0.0);  // rewritten in place, the same total: no stall
    write(path, "1000000000001000");   // 10^15 us more than wall time allows: capped
    EXPECT_EQ(p->stall_share(), 1.0);
    // Replaced by another file (renamed over it): the new one is read, and a
    // total that went back counts as no stall.
    write(path + ".new", "500");
    std::filesystem::rename(path + ".new", path);
    EXPECT_EQ(p->stall_share(), 0.0);
    write(path, "2000000000000500");
    EXPECT_EQ(p->stall_share(), 1.0);
    std::filesystem::remove(path);
    EXPECT_LT(p->stall_share(), 0.0);  // unreadable this time
    write(path, "2000000000000500");
    EXPECT_EQ(p->stall_share(), 0.0);  // back, with the total last read
}

TEST(MemoryPressureSignal, SystemProbeGivesAShareOrNothing) {
    auto p = make_system_memory_pressure();
    if (!p) GTEST_SKIP() << "no pressure-stall information on this system";
    EXPECT_NE(std::string(p->name()), "");
    for (int i = 0; i < 3; ++i) {
        const double share = p->stall_share();
        EXPECT_LE(share, 1.0);  // negative = unreadable this time
    }
    // Linux always has MemAvailable (or the cgroup's headroom).
    const std::optional<uint64_t> available = p->available_bytes();
    ASSERT_TRUE(available.has_value());
    EXPECT_GT(*available, 0u);
}

TEST(SystemAdvisor, ReleasedFilePagesReadBackTheSameBytes) {
    // Hints go to a read-only file mapping, as in the engine: a released range
    // faults back in from the file.
    const std::string dir = test::scratch_dir();
    const std::string path = dir + "/advised.bin";
    std::vector<uint8_t> bytes(5 * 4096 + 123);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t(i * 31 + 7);
    {
        std::ofstream out(path, std::ios::binary);
        out.write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
    }
    {
        MappedFile map(path);
        auto a = make_system_advisor();
        EXPECT_NE(std::string(a->name()), "");
        a->will_need(map.data() + 5, 3 * 4096);
        EXPECT_EQ(0, std::memcmp(map.data(), bytes.data(), bytes.size()));
        a->release(map.data() + 4096 + 3, 10);  // widened to the whole page
        a->release(map.data(), map.size());
        a->will_need(nullptr, 0);
        a->release(nullptr, 0);
        EXPECT_EQ(0, std::memcmp(map.data(), bytes.data(), bytes.size()));
    }
    std::filesystem::remove_all(dir);
}

}  // namespace
