// The dense weights' copy: every dense tensor's bytes, exactly, at the
// address relocate() gives; nothing else relocates; failed and short reads
// are clear errors; buffered reads give the same copy as O_DIRECT ones.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "common/error.hpp"
#include "gguf/gguf_file.hpp"
#include "io/fault_injection.hpp"
#include "model/tensor_roles.hpp"
#include "runtime/dense_copy.hpp"
#include "support/generated_models.hpp"

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
void expect_exact_copy(const gguf::GgufFile &file, const DenseCopy &copy, const std::string &left_out = "") {
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
    EXPECT_GT(experts, 0u);
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
            if (!direct) EXPECT_FALSE(copy.direct());
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

}  // namespace
