// Context::save_state / load_state on generated models of every
// architecture: continuing after a load gives exactly the logits of an
// uninterrupted run, and a refused load leaves the context as it was.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "runtime/context.hpp"
#include "support/generated_models.hpp"
#include "support/paths.hpp"
#include "support/status_of.hpp"

namespace fs = std::filesystem;

namespace {

using moe::test::status_of;
using moe::test::step;

std::string model_path(const std::string &arch, const std::string &extra = "") {
    return moe::test::generated_model("state_context_models", arch,
                                      "--n-embd 128 --n-head 4 --n-head-kv 2 --n-layer 2 --n-expert 8 "
                                      "--n-expert-used 2 --n-ff-expert 128 --n-vocab 200 --n-ctx 64",
                                      extra);
}

#define REQUIRE_MODEL(var, ...) REQUIRE_GENERATED_MODEL(var, model_path(__VA_ARGS__))

moe::ContextParams params_for(const std::string &path, bool exact = false, int32_t n_ctx = 32) {
    moe::ContextParams p = moe::test::context_params(path, exact, n_ctx);
    p.profile_disabled = true;
    return p;
}

// Logits of each continuation token, stepped one at a time.
std::vector<std::vector<float>> continue_with(moe::Context &c, const std::vector<int32_t> &tokens) {
    std::vector<std::vector<float>> out;
    for (int32_t t : tokens) out.push_back(step(c, {t}));
    return out;
}

bool bit_identical(const std::vector<std::vector<float>> &a, const std::vector<std::vector<float>> &b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * 4) != 0) return false;
    return true;
}

const std::vector<int32_t> kPrompt = {5, 17, 150, 3, 99, 42, 7};
const std::vector<int32_t> kContinuation = {131, 64, 2, 18};

class StateEveryArch : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(StateEveryArch, ContinuingAfterLoadIsBitIdentical) {
    const auto &[arch, exact] = GetParam();
    REQUIRE_MODEL(path, arch, "--quant-mix mixed --seed 11");
    const std::string file = moe::test::scratch_dir() + "/s.state";

    moe::Context original(params_for(path, exact));
    step(original, kPrompt);
    original.save_state(file);
    const auto uninterrupted = continue_with(original, kContinuation);

    // A fresh context of the same model.
    moe::Context fresh(params_for(path, exact));
    fresh.load_state(file);
    EXPECT_EQ(fresh.n_past(), int32_t(kPrompt.size()));
    EXPECT_TRUE(bit_identical(continue_with(fresh, kContinuation), uninterrupted));

    // A context that has been doing something else meanwhile.
    original.reset();
    step(original, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
    original.load_state(file);
    EXPECT_TRUE(bit_identical(continue_with(original, kContinuation), uninterrupted));

    // Loading twice from the same file gives the same result again.
    original.load_state(file);
    EXPECT_TRUE(bit_identical(continue_with(original, kContinuation), uninterrupted));
}

INSTANTIATE_TEST_SUITE_P(Model, StateEveryArch,
                         ::testing::Combine(::testing::Values("qwen3moe", "llama", "olmoe", "qwen2moe", "gpt-oss",
                                                               "deepseek2"),
                                            ::testing::Bool()));

TEST(StateContext, EmptyContextSavesAndLoads) {
    REQUIRE_MODEL(path, "qwen3moe");
    const std::string file = moe::test::scratch_dir() + "/empty.state";
    moe::Context a(params_for(path));
    a.save_state(file);
    step(a, {1, 2, 3});
    a.load_state(file);
    EXPECT_EQ(a.n_past(), 0);
    moe::Context b(params_for(path));
    EXPECT_EQ(step(a, kPrompt), step(b, kPrompt));
}

TEST(StateContext, FullContextSavesAndLoads) {
    REQUIRE_MODEL(path, "llama");
    const std::string file = moe::test::scratch_dir() + "/full.state";
    moe::Context a(params_for(path, false, 8));
    step(a, {1, 2, 3, 4, 5, 6, 7, 8});
    a.save_state(file);
    moe::Context b(params_for(path, false, 8));
    b.load_state(file);
    EXPECT_EQ(b.n_past(), 8);
    EXPECT_EQ(status_of([&] { step(b, {9}); }), moe::Status::context_full);
}

// Every refused load: the context keeps its tokens and KV cache, so it goes on
// exactly as a twin that never saw the failed load.
TEST(StateContext, RefusedLoadsLeaveTheContextAsItWas) {
    REQUIRE_MODEL(path, "qwen3moe");
    REQUIRE_MODEL(other_model, "qwen3moe", "--seed 99");
    const std::string dir = moe::test::scratch_dir();

    moe::Context saver(params_for(path));
    step(saver, kPrompt);
    saver.save_state(dir + "/good.state");
    moe::Context other(params_for(other_model));
    step(other, kPrompt);
    other.save_state(dir + "/other-model.state");
    moe::Context longer(params_for(path, false, 48));
    step(longer, kPrompt);
    longer.save_state(dir + "/other-nctx.state");
    moe::Context exact(params_for(path, true));
    step(exact, kPrompt);
    exact.save_state(dir + "/other-kv-type.state");
    {
        const auto size = fs::file_size(dir + "/good.state");
        fs::copy_file(dir + "/good.state", dir + "/truncated.state");
        fs::resize_file(dir + "/truncated.state", size - 3);
        fs::copy_file(dir + "/good.state", dir + "/flipped.state");
        std::fstream f(dir + "/flipped.state", std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(std::streamoff(size / 2));
        f.put('\x5a');
    }
    std::ofstream(dir + "/garbage.state") << "not a state file at all";

    struct Case {
        const char *file;
        moe::Status want;
    };
    const Case cases[] = {
        {"other-model.state", moe::Status::state_mismatch},
        {"other-nctx.state", moe::Status::state_mismatch},
        {"other-kv-type.state", moe::Status::state_mismatch},
        {"truncated.state", moe::Status::bad_format},
        {"flipped.state", moe::Status::bad_format},
        {"garbage.state", moe::Status::bad_format},
        {"missing.state", moe::Status::io},
    };
    moe::Context subject(params_for(path)), twin(params_for(path));
    step(subject, {9, 8, 7});
    step(twin, {9, 8, 7});
    for (const Case &c : cases) {
        std::string msg;
        EXPECT_EQ(status_of([&] { subject.load_state(dir + "/" + c.file); }, &msg), c.want) << c.file;
        EXPECT_NE(msg.find(c.file), std::string::npos) << msg;
        EXPECT_EQ(subject.n_past(), 3) << c.file;
    }
    EXPECT_TRUE(bit_identical(continue_with(subject, kContinuation), continue_with(twin, kContinuation)));
}

TEST(StateContext, SaveFailureKeepsThePreviousFile) {
    REQUIRE_MODEL(path, "olmoe");
    const std::string dir = moe::test::scratch_dir();
    moe::Context c(params_for(path));
    step(c, kPrompt);
    c.save_state(dir + "/s.state");
    EXPECT_EQ(status_of([&] { c.save_state(dir + "/no-such-dir/s.state"); }), moe::Status::io);
    // A directory in the way: refused before anything is written.
    fs::create_directories(dir + "/taken.state/x");
    EXPECT_EQ(status_of([&] { c.save_state(dir + "/taken.state"); }), moe::Status::invalid_argument);
    EXPECT_TRUE(fs::is_directory(dir + "/taken.state/x"));
    for (const auto &e : fs::directory_iterator(dir))
        EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
    moe::Context d(params_for(path));
    d.load_state(dir + "/s.state");
    EXPECT_EQ(d.n_past(), int32_t(kPrompt.size()));
}

}  // namespace
