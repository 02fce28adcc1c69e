// The dense weights' copy: every dense tensor's bytes, exactly, at the
// address relocate() gives, from every shard of a split set; nothing else
// relocates; failed and short reads and a failing backend are clear errors
// with no read left in flight; buffered reads give the same copy as O_DIRECT
// ones, also when the filesystem refuses O_DIRECT reads; a context with tied embeddings copies them and gives the same logits.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "common/error.hpp"
#include "gguf/gguf_file.hpp"
#include "io/fault_injection.hpp"
#include "model/tensor_roles.hpp"
#include "io/forwarding_backend.hpp"
#include "io/read_file.hpp"
#include "runtime/dense_copy.hpp"
#include "support/generated_models.hpp"
#include "support/gguf_builder.hpp"
#include "support/paths.hpp"
#include "support/read_backends.hpp"

namespace {

using namespace moe;

std::string make_model_file() {
    return test::generated_model("dense_copy_models", "qwen3moe",
                                 "--n-embd 128 --n-head 4 --n-head-kv 2 --n-layer 3 --n-expert 8 "
                                 "--n-expert-used 2 --n-ff-expert 128 --n-vocab 200 --n-ctx 64",
                                 "--quant-mix mixed --seed 5");
}

// Compares every copied dense tensor with the mapping and checks that expert
// tensors and those the filter left out are not part of the copy.
void expect_exact_copy(const gguf::GgufFile &file, const DenseCopy &copy, const std::string &left_out = "",
                       bool has_experts = true) {
    uint64_t dense = 0, experts = 0;
    for (const gguf::TensorInfo &t : file.tensors()) {
        if (is_expert_tensor(t) || t.name == left_out) {
            experts += is_expert_tensor(t);
            EXPECT_FALSE(copy.contains(t.data)) << t.name;
            EXPECT_THROW(copy.relocate(t.data), Error) << t.name;
            continue;
        }
        EXPECT_TRUE(copy.contains(t.data)) << t.name;
        const uint8_t *c = copy.relocate(t.data);
        ASSERT_NE(c, t.data) << t.name;
        ASSERT_EQ(std::memcmp(c, t.data, t.nbytes), 0) << t.name;
        // An address inside the tensor moves with it.
        EXPECT_EQ(copy.relocate(t.data + t.nbytes - 1), c + t.nbytes - 1) << t.name;
        dense += t.nbytes;
    }
    EXPECT_EQ(experts > 0, has_experts);
    EXPECT_EQ(copy.tensor_bytes(), dense);
    EXPECT_GE(copy.bytes_read(), dense);
}

TEST(DenseCopy, HoldsEveryDenseTensorExactly) {
    REQUIRE_GENERATED_MODEL(path, make_model_file());
    const auto file = gguf::GgufFile::open(path);
    for (bool direct : {true, false})
        for (NumaPlacement placement : {NumaPlacement::local, NumaPlacement::interleave}) {
            const DenseCopy copy(*file, placement, direct);
            expect_exact_copy(*file, copy);
            // O_DIRECT exactly where the filesystem takes it, so both paths are the ones tested.
            EXPECT_EQ(copy.direct(), direct && io::ReadFile(path, true).direct());
            EXPECT_NE(copy.describe().find("dense weights copied in"), std::string::npos) << copy.describe();
        }
    // Addresses outside the mapping's dense tensors are refused, not guessed.
    const DenseCopy copy(*file, NumaPlacement::local, true);
    EXPECT_THROW(copy.relocate(file->header_bytes()), Error);
}

TEST(DenseCopy, TheFilterLeavesTensorsInTheMapping) {
    REQUIRE_GENERATED_MODEL(path, make_model_file());
    const auto file = gguf::GgufFile::open(path);
    const DenseCopy copy(*file, NumaPlacement::local, true,
                         [](const gguf::TensorInfo &t) { return t.name != "token_embd.weight"; });
    expect_exact_copy(*file, copy, "token_embd.weight");
}

TEST(DenseCopy, ReadsEveryShardOfASplitSet) {
    std::vector<test::GgufBuilder> shards(3);
    shards[0].kv_string("general.architecture", "qwen3moe");
    shards[0].tensor_random("a", GgmlType::F32, {8, 1000}, 1);
    shards[1].tensor_random("b", GgmlType::F32, {16}, 2).tensor_random("c", GgmlType::Q8_0, {64, 3000}, 3);
    shards[2].tensor_random("d", GgmlType::F32, {4, 5}, 4);
    const auto paths = test::write_split_set(test::scratch_dir() + "/dense-split", std::move(shards));
    const auto file = gguf::GgufFile::open(paths[0]);
    ASSERT_EQ(file->n_shards(), 3u);
    for (bool direct : {true, false}) {
        const DenseCopy copy(*file, NumaPlacement::local, direct);
        expect_exact_copy(*file, copy, "", false);
    }
}

// A backend whose first reap throws, as a broken ring would, and which
// notes how many reads were still unreaped when it is destroyed.
uint32_t g_unreaped_at_destruction = 99;

class ThrowingOnceBackend final : public io::ForwardingBackend {
public:
    using ForwardingBackend::ForwardingBackend;
    ~ThrowingOnceBackend() override { g_unreaped_at_destruction = inner().in_flight(); }
    size_t reap(std::span<io::ReadCompletion> out, bool wait) override {
        if (!thrown_) {
            thrown_ = true;
            fail(Status::io, "the ring broke");
        }
        return ForwardingBackend::reap(out, wait);
    }

private:
    bool thrown_ = false;
};

TEST(DenseCopy, ABackendFailureLeavesNoReadInFlight) {
    REQUIRE_GENERATED_MODEL(path, make_model_file());
    const auto file = gguf::GgufFile::open(path);
    g_unreaped_at_destruction = 99;
    try {
        DenseCopy copy(*file, NumaPlacement::local, false, nullptr,
                       std::make_unique<ThrowingOnceBackend>(io::make_read_backend(io::BackendKind::pread, 4)));
        FAIL() << "the backend's exception was lost";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("the ring broke"), std::string::npos) << e.what();
    }
    // Every read was reaped before the buffer and the files went away.
    EXPECT_EQ(g_unreaped_at_destruction, 0u);
}

TEST(DenseCopy, TiedEmbeddingsAreCopiedAndTheLogitsDoNotChange) {
    REQUIRE_GENERATED_MODEL(path, test::generated_model("dense_copy_models", "qwen3moe",
                                                        "--n-embd 128 --n-head 4 --n-head-kv 2 --n-layer 2 "
                                                        "--n-expert 8 --n-expert-used 2 --n-ff-expert 128 "
                                                        "--n-vocab 200 --n-ctx 64",
                                                        "--quant-mix mixed --seed 6 --tie-output"));
    std::vector<std::vector<float>> logits;
    for (int32_t mode : {MOESTREAM_IO_MMAP, MOESTREAM_IO_DIRECT}) {
        ContextParams p = test::context_params(path);
        p.io_mode = mode;
        p.profile_disabled = true;
        Context ctx(p);
        const ModelWeights &w = ctx.model().weights();
        ASSERT_EQ(w.output.data, w.token_embd.data);  // tied: one table, read whole by the output head
        const MappedFile &map = ctx.model().file().shard_mapping(0);
        const bool mapped = w.output.data >= map.data() && w.output.data < map.data() + map.size();
        EXPECT_EQ(mapped, mode == MOESTREAM_IO_MMAP);
        logits.push_back(test::step(ctx, {3, 1, 4, 1, 5}));
    }
    ASSERT_EQ(logits[0].size(), logits[1].size());
    EXPECT_EQ(std::memcmp(logits[0].data(), logits[1].data(), logits[0].size() * sizeof(float)), 0);
}

Status status_of_copy(const gguf::GgufFile &file, io::Fault fault, uint64_t after, std::string &message) {
    auto backend = std::make_unique<io::FaultInjectingBackend>(
        io::make_read_backend(io::BackendKind::pread, 4),
        [fault, after](const io::ReadRequest &, uint64_t seq) { return seq == after ? fault : io::Fault{}; });
    try {
        DenseCopy copy(file, NumaPlacement::local, false, nullptr, std::move(backend));
    } catch (const Error &e) {
        message = e.what();
        return e.status();
    }
    return Status::ok;
}

TEST(DenseCopy, FailedOrShortReadsAreIoErrorsNamingTheFile) {
    REQUIRE_GENERATED_MODEL(path, make_model_file());
    const auto file = gguf::GgufFile::open(path);
    std::string message;

    io::Fault eio;
    eio.kind = io::Fault::Kind::error;
    eio.error = EIO;
    ASSERT_EQ(status_of_copy(*file, eio, 1, message), Status::io);
    EXPECT_NE(message.find("dense weights"), std::string::npos) << message;
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find(std::strerror(EIO)), std::string::npos) << message;

    io::Fault short_read;
    short_read.kind = io::Fault::Kind::short_read;
    short_read.short_by = 4096;
    ASSERT_EQ(status_of_copy(*file, short_read, 0, message), Status::io);
    EXPECT_NE(message.find("arrived"), std::string::npos) << message;

    // The same plan without a fault copies fine: the failures above are the faults'.
    EXPECT_EQ(status_of_copy(*file, io::Fault{}, 0, message), Status::ok);
}

// A filesystem that accepts O_DIRECT at open but refuses it for reads
// (EINVAL): the copy reads that file buffered instead and is still exact.
TEST(DenseCopy, ODirectRefusedForReadsFallsBackToBufferedReads) {
    REQUIRE_GENERATED_MODEL(path, make_model_file());
    if (!io::ReadFile(path, true).direct()) GTEST_SKIP() << "no O_DIRECT on this filesystem";
    const auto file = gguf::GgufFile::open(path);
    // The refused reads move no bytes, so the exact copy below shows the retry read them.
    // The copy owns (and destroys) the backend: the refusing files are counted here.
    uint32_t refusing_files = 0;
    auto refusing = std::make_unique<test::RefusingBackend>(
        io::make_read_backend(io::BackendKind::pread, 4), [&refusing_files](int fd) {
            const bool refuses = test::RefusingBackend::opened_direct(fd);
            refusing_files += refuses;
            return refuses;
        });
    const DenseCopy copy(*file, NumaPlacement::local, true, nullptr, std::move(refusing));
    EXPECT_GT(refusing_files, 0u);
    expect_exact_copy(*file, copy);
    EXPECT_FALSE(copy.direct());
    EXPECT_EQ(copy.describe().find("O_DIRECT"), std::string::npos) << copy.describe();
}

}  // namespace
