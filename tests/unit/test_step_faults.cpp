// Expert read faults seen through a Context, at every read of a short
// generation: a prompt run in several chunks, then decode steps. A step whose
// read fails returns Error(io) and leaves n_past and the caller's logits as
// they were; the cache is left with nothing pinned or half read (it has room
// for one layer only, so a slot kept by the failure would stop the next
// layer); the same step run again, without a reset, succeeds; and the logits
// of the whole generation are bit-identical to those of a context that never
// saw a fault. Stats stay consistent: every byte the device delivered is
// counted once, as demand or prefetch bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "experts/budget_planner.hpp"
#include "experts/gguf_layouts.hpp"
#include "experts/packed_file.hpp"
#include "experts/routing_trace.hpp"
#include "experts/streaming_source.hpp"
#include "io/fault_injection.hpp"
#include "io/observed_backend.hpp"
#include "runtime/context.hpp"
#include "support/generated_models.hpp"
#include "support/paths.hpp"
#include "support/scoped_env.hpp"

namespace {

using namespace moe;

std::string make_model_file() {
    return test::generated_model("step_faults_models", "qwen3moe",
                                 "--n-embd 64 --n-head 4 --n-head-kv 2 --n-layer 3 --n-expert 8 "
                                 "--n-expert-used 2 --n-ff-expert 64 --n-vocab 120 --n-ctx 64",
                                 "--quant-mix mixed --seed 5");
}

// A 5-token prompt (three chunks of at most 2 tokens), then three decode steps.
const std::vector<std::vector<int32_t>> kSteps = {{5, 17, 110, 3, 99}, {42}, {7}, {61}};

ContextParams params(const std::string &path, int32_t io_mode, int32_t prefetch) {
    ContextParams p = test::context_params(path, false, 16);
    p.io_mode = io_mode;
    p.prefetch = prefetch;
    p.max_batch = 2;
    p.profile_disabled = true;
    return p;
}

// Bytes the device delivered equal the bytes the source counted, once every
// read has been taken.
void expect_bytes_counted_once(Context &c) {
    c.expert_source().drain();
    moestream_stats s{};
    c.fill_stats(s);
    EXPECT_EQ(s.bytes_read_demand + s.bytes_read_prefetch, s.io_bytes_completed);
    EXPECT_LE(s.bytes_read_wasted, s.bytes_read_demand + s.bytes_read_prefetch);
}

struct Generation {
    std::vector<float> logits;  // every step's, one after the other
    int failed_steps = 0;
};

// Runs kSteps; a step that fails with Error(io) is checked and run again.
Generation generate(Context &c, const char *what) {
    Generation g;
    const size_t n_vocab = size_t(c.n_vocab());
    std::vector<float> out(n_vocab);
    for (const auto &tokens : kSteps) {
        const int32_t n_past = c.n_past();
        std::fill(out.begin(), out.end(), -1234.5f);
        try {
            c.step(tokens.data(), int32_t(tokens.size()), out.data());
        } catch (const Error &e) {
            ++g.failed_steps;
            EXPECT_EQ(e.status(), Status::io) << what << ": " << e.what();
            EXPECT_NE(std::string(e.what()).find("layer "), std::string::npos) << e.what();
            EXPECT_EQ(c.n_past(), n_past) << what;
            EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float v) { return v == -1234.5f; }))
                << what << ": a failed step wrote logits";
            expect_bytes_counted_once(c);
            c.step(tokens.data(), int32_t(tokens.size()), out.data());  // the fault is used up
        }
        g.logits.insert(g.logits.end(), out.begin(), out.end());
    }
    expect_bytes_counted_once(c);
    return g;
}

struct Mode {
    int32_t io_mode;
    int32_t prefetch;
    const char *name;
};

class StepFaults : public ::testing::TestWithParam<Mode> {};

TEST_P(StepFaults, AReadFailingAnywhereLeavesTheContextAsItWas) {
    REQUIRE_GENERATED_MODEL(path, make_model_file());
    // Experts from the GGUF slices, or from a packed file whose checksums
    // catch corrupted bytes (slices carry none).
    const std::string dir = test::scratch_dir();
    const std::string packed = dir + "/m.moepack";
    {
        auto model = Model::open(path);
        write_packed_file(packed, model_fingerprint_of(model->file()), model->expert_layouts(),
                          shard_paths_of(model->file()));
    }
    // One layer's experts: every layer misses, and a slot the failure kept
    // pinned or loading would leave the next layer without room.
    const test::ScopedEnv slots("MOESTREAM_CACHE_SLOTS", "8");
    int failed = 0;
    for (const bool use_packed : {false, true}) {
        ContextParams p = params(path, GetParam().io_mode, GetParam().prefetch);
        if (use_packed) p.packed_path = packed;
        std::vector<float> want;
        uint64_t reads = 0;
        {
            Context ref(p);
            want = generate(ref, "reference").logits;
            moestream_stats s{};
            ref.fill_stats(s);
            reads = s.io_reads_completed;
        }
        ASSERT_GT(reads, 0u);
        for (const char *kind : {"error:errno=5", "short", "corrupt"}) {
            if (!use_packed && std::strcmp(kind, "corrupt") == 0) continue;
            for (uint64_t after = 0; after < reads; ++after) {
                const std::string spec = std::string(kind) + ":after=" + std::to_string(after);
                SCOPED_TRACE(spec + (use_packed ? " packed" : " slices"));
                const test::ScopedEnv faults("MOESTREAM_FAULT_INJECT", spec);
                Context c(p);
                const Generation g = generate(c, spec.c_str());
                failed += g.failed_steps;
                EXPECT_EQ(0, std::memcmp(g.logits.data(), want.data(), want.size() * sizeof(float)))
                    << spec << ": logits differ from a context that saw no fault";
            }
        }
    }
    EXPECT_GT(failed, 0) << "no fault ever failed a step";
    std::filesystem::remove_all(dir);
}

// Records kSteps into a routing trace with a read failing at each point of
// the run in turn, and checks the trace against that of a run without
// faults: the whole of it when a failed step is run again, or the tokens kept
// (those of the steps before the failure) when it is not.
void expect_trace_of_kept_tokens(const Mode &mode, bool run_failed_step_again) {
    const test::ScopedEnv slots("MOESTREAM_CACHE_SLOTS", "8");
    const std::string dir = test::scratch_dir();
    ContextParams p = params(make_model_file(), mode.io_mode, mode.prefetch);
    p.routing_trace_path = dir + "/ref.trace";
    uint64_t reads = 0;
    {
        Context ref(p);
        generate(ref, "reference");
        moestream_stats s{};
        ref.fill_stats(s);
        reads = s.io_reads_completed;
    }
    const RoutingTrace all = read_routing_trace(p.routing_trace_path);
    ASSERT_EQ(all.n_tokens, 8u);
    p.routing_trace_path = dir + "/faults.trace";
    int failed = 0;
    for (uint64_t after = 0; after < reads; ++after) {
        const std::string spec = "error:after=" + std::to_string(after);
        SCOPED_TRACE(spec);
        const test::ScopedEnv faults("MOESTREAM_FAULT_INJECT", spec);
        RoutingTrace want = all;
        {
            Context c(p);
            if (run_failed_step_again) {
                failed += generate(c, spec.c_str()).failed_steps;
            } else {
                std::vector<float> out(size_t(c.n_vocab()));
                for (const auto &tokens : kSteps) {
                    try {
                        c.step(tokens.data(), int32_t(tokens.size()), out.data());
                    } catch (const Error &) {
                        ++failed;
                        break;  // given up on
                    }
                }
                want.truncate(uint64_t(c.n_past()));
            }
        }
        const RoutingTrace got = read_routing_trace(p.routing_trace_path);
        EXPECT_EQ(got.n_tokens, want.n_tokens);
        EXPECT_EQ(got.token_rows, want.token_rows);
        EXPECT_EQ(got.row_layer, want.row_layer);
        EXPECT_EQ(got.ids, want.ids);
    }
    EXPECT_GT(failed, 0);
    std::filesystem::remove_all(dir);
}

// A routing trace lists the tokens the context kept, numbered as they were
// kept: a step that failed in its second chunk, after the first one ran,
// leaves no rows at token indices of its own, and the trace of a run that
// saw faults is the trace of one that saw none.
TEST_P(StepFaults, ARoutingTraceHoldsOnlyTheTokensKept) {
    REQUIRE_GENERATED_MODEL(path, make_model_file());
    expect_trace_of_kept_tokens(GetParam(), true);
}

// A failed step that is not run again (the caller gives up, or resets and
// goes on with other tokens) leaves no rows in the routing trace either: the
// rows it recorded before the failing read are dropped.
TEST_P(StepFaults, AFailedStepThatIsNotRunAgainLeavesNoRows) {
    REQUIRE_GENERATED_MODEL(path, make_model_file());
    expect_trace_of_kept_tokens(GetParam(), false);
}

// The fault injector inside a context's chain of read backends.
io::FaultInjectingBackend *fault_injector(Context &c) {
    io::ReadBackend *b = c.expert_source().observed_reads();
    while (b) {
        if (auto *injector = dynamic_cast<io::FaultInjectingBackend *>(b)) return injector;
        auto *decorator = dynamic_cast<io::ForwardingBackend *>(b);
        b = decorator ? &decorator->inner() : nullptr;
    }
    return nullptr;
}

// Closing a context while reads are in flight waits for them: nothing lands
// in freed memory (the sanitizer builds check) and nothing hangs. The first
// layer's first expert fails (its first read; an expert here is three reads,
// its other two land), while the reads of the layer's other experts (the
// fourth read on) are held in flight by a delay far longer than the test:
// the step fails with them in flight. The delay is released once someone
// blocks waiting for them, and the test passes only if that was the closing
// context: a close that did not wait would block nowhere, and the releaser,
// released itself once the close returned, would have seen no one waiting.
TEST_P(StepFaults, ClosingWithReadsInFlightWaitsForThem) {
    REQUIRE_GENERATED_MODEL(path, make_model_file());
    const test::ScopedEnv faults("MOESTREAM_FAULT_INJECT", "error:count=1,delay:ms=600000:after=3:count=0");
    std::shared_ptr<io::DelayGate> gate;
    std::atomic<bool> closing{false};
    bool waited_at_close = false;
    std::thread releaser;
    {
        Context c(params(path, GetParam().io_mode, GetParam().prefetch));
        io::FaultInjectingBackend *injector = fault_injector(c);
        ASSERT_NE(injector, nullptr);
        gate = injector->delay_gate();
        // Started first: a step that waited for the held reads would get them too.
        releaser = std::thread([&] {
            waited_at_close = gate->await_waiter(std::chrono::seconds(60)) && closing;
            gate->release();
        });
        std::vector<float> out(size_t(c.n_vocab()));
        try {
            c.step(kSteps[0].data(), int32_t(kSteps[0].size()), out.data());
            ADD_FAILURE() << "the failed read did not fail the step";
        } catch (const Error &e) {
            EXPECT_EQ(e.status(), Status::io) << e.what();
        }
        EXPECT_GT(c.expert_source().observed_reads()->in_flight(), 0u) << "no read in flight at the close";
        closing = true;
    }
    gate->release();  // after a close that did not wait: the releaser stops waiting
    releaser.join();
    EXPECT_TRUE(waited_at_close) << "the context closed without waiting for its reads in flight";
}

// A budget that leaves fewer expert slots than one layer may need is refused
// at open, naming the numbers, rather than failing or waiting forever in a
// step; one that leaves exactly enough runs every step.
TEST(StepBudget, TooSmallForOneLayerIsRefusedAtOpen) {
    REQUIRE_GENERATED_MODEL(path, make_model_file());
    ContextParams p = params(path, MOESTREAM_IO_PREAD, MOESTREAM_PREFETCH_BOTH);
    uint64_t fixed = 0, slot = 0;
    int32_t layer_experts = 0;
    {
        auto model = Model::open(path);
        fixed = model->dense_bytes() + runtime_bytes_bound(model->hparams(), p.n_ctx, p.max_batch, p.n_threads, p.exact);
        slot = StreamingExpertSource::slot_bytes_for(model->expert_layouts(), nullptr, false);
        layer_experts = model->hparams().n_expert;
    }
    for (const uint64_t slots_room : {uint64_t(0), uint64_t(layer_experts - 1)}) {
        p.memory_budget = fixed + slots_room * slot + slot - 1;
        try {
            Context c(p);
            ADD_FAILURE() << "opened with room for " << slots_room << " experts";
        } catch (const Error &e) {
            EXPECT_EQ(e.status(), Status::out_of_memory) << e.what();
            EXPECT_NE(std::string(e.what()).find("one layer may need " + std::to_string(layer_experts)),
                      std::string::npos)
                << e.what();
        }
    }
    p.memory_budget = fixed + uint64_t(layer_experts) * slot;
    Context c(p);
    const Generation g = generate(c, "one layer's slots");
    EXPECT_EQ(g.failed_steps, 0);
    moestream_stats s{};
    c.fill_stats(s);
    EXPECT_EQ(s.expert_cache_bytes, uint64_t(layer_experts) * slot);
    EXPECT_LE(s.resident_bytes, p.memory_budget);
}

// pread without prefetch (every read a demand read), pread with every
// prefetch, and O_DIRECT reads through io_uring where the system has them
// (else the pread pool) with every prefetch, wrong ones cancelled.
INSTANTIATE_TEST_SUITE_P(Modes, StepFaults,
                         ::testing::Values(Mode{MOESTREAM_IO_PREAD, MOESTREAM_PREFETCH_OFF, "pread_no_prefetch"},
                                           Mode{MOESTREAM_IO_PREAD, MOESTREAM_PREFETCH_BOTH, "pread_prefetch"},
                                           Mode{MOESTREAM_IO_DIRECT, MOESTREAM_PREFETCH_BOTH, "direct_prefetch"}),
                         [](const auto &info) { return std::string(info.param.name); });

}  // namespace
