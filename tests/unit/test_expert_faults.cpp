// I/O faults in expert reads seen from the forward pass: a failed or short
// read makes the pass throw Error(io) naming the layer, the expert and the
// errno; nothing hangs; and the same pass, run again from position 0 (what
// moestream_reset does), gives exactly the logits of a run that never failed.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/thread_pool.hpp"
#include "experts/resident_expert_source.hpp"
#include "experts/streaming_source.hpp"
#include "io/fault_injection.hpp"
#include "model/model.hpp"
#include "runtime/forward_pass.hpp"
#include "support/generated_models.hpp"

namespace {

std::string make_model_file() {
    return moe::test::generated_model("expert_faults_models", "qwen3moe",
                                      "--n-embd 128 --n-head 4 --n-head-kv 2 --n-layer 3 --n-expert 8 "
                                      "--n-expert-used 2 --n-ff-expert 128 --n-vocab 200 --n-ctx 64",
                                      "--quant-mix mixed --seed 3");
}

moe::ForwardOptions options() {
    moe::ForwardOptions o;
    o.n_ctx = 16;
    o.max_batch = 8;
    return o;
}

const std::vector<int32_t> kTokens = {5, 17, 150, 3, 99, 42};

std::vector<float> run(moe::ForwardPass &fp, int32_t n_vocab) {
    std::vector<float> logits(static_cast<size_t>(n_vocab));
    fp.run(kTokens.data(), int32_t(kTokens.size()), 0, logits.data());
    return logits;
}

}  // namespace

TEST(ExpertReadFaults, StepFailsWithLayerExpertErrnoAndRecovers) {
    REQUIRE_GENERATED_MODEL(path, make_model_file());
    auto model = moe::Model::open(path);
    const int32_t n_vocab = model->hparams().n_vocab;
    moe::ThreadPool pool(2);

    moe::ResidentExpertSource resident(model->expert_layouts(), nullptr);
    moe::ForwardPass reference(*model, resident, pool, options());
    const std::vector<float> want = run(reference, n_vocab);

    struct Case {
        moe::io::Fault::Kind kind;
        uint64_t fail_at;  // which read fails
        const char *expect;
    };
    const Case cases[] = {
        {moe::io::Fault::Kind::error, 0, "errno 5"},
        {moe::io::Fault::Kind::error, 7, "errno 5"},
        {moe::io::Fault::Kind::short_read, 3, "short read"},
    };
    for (const Case &c : cases) {
        bool armed = true;
        uint64_t faults = 0;
        moe::StreamingSourceConfig cfg;
        cfg.layers = model->expert_layouts();
        cfg.shard_paths = {path};
        cfg.direct = false;
        cfg.slots = 8;
        cfg.queue_depth = 8;
        cfg.backend_override = std::make_unique<moe::io::FaultInjectingBackend>(
            moe::io::make_pread_backend(8), [&](const moe::io::ReadRequest &, uint64_t seq) {
                moe::io::Fault f;
                if (armed && seq == c.fail_at) {
                    f.kind = c.kind;
                    f.error = EIO;
                    f.short_by = 100000;
                    ++faults;
                }
                return f;
            });
        moe::StreamingExpertSource source(std::move(cfg));
        moe::ForwardPass fp(*model, source, pool, options());
        std::vector<float> logits(size_t(n_vocab), 0.0f);
        try {
            fp.run(kTokens.data(), int32_t(kTokens.size()), 0, logits.data());
            ADD_FAILURE() << "read " << c.fail_at << " failed but the pass succeeded";
        } catch (const moe::Error &e) {
            const std::string msg = e.what();
            EXPECT_EQ(e.status(), moe::Status::io) << msg;
            EXPECT_NE(msg.find("layer "), std::string::npos) << msg;
            EXPECT_NE(msg.find("expert "), std::string::npos) << msg;
            EXPECT_NE(msg.find(c.expect), std::string::npos) << msg;
        }
        EXPECT_EQ(faults, 1u);
        // The storage recovers; the pass starts again from position 0.
        armed = false;
        source.drain();
        EXPECT_EQ(run(fp, n_vocab), want) << "after a fault at read " << c.fail_at;
    }
}
