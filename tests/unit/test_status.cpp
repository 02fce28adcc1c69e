#include <gtest/gtest.h>

#include <cstring>

#include "common/error.hpp"
#include "common/ggml_types.hpp"

TEST(Error, FormatsMessageAndKeepsStatus) {
    try {
        moe::fail(moe::Status::bad_format, "tensor %s has %d dims", "x", 7);
        FAIL() << "fail() returned";
    } catch (const moe::Error &e) {
        EXPECT_EQ(e.status(), moe::Status::bad_format);
        EXPECT_STREQ(e.what(), "tensor x has 7 dims");
    }
}

TEST(Error, ErrnoVariantNamesTheErrno) {
    try {
        moe::fail_errno(2, "open %s", "f");
        FAIL();
    } catch (const moe::Error &e) {
        EXPECT_EQ(e.status(), moe::Status::io);
        EXPECT_NE(std::strstr(e.what(), "errno 2"), nullptr);
    }
}

TEST(GgmlTypes, BlockGeometryMatchesTheFormat) {
    EXPECT_EQ(moe::type_traits(moe::GgmlType::Q4_K).block_bytes, 144u);
    EXPECT_EQ(moe::row_bytes(moe::GgmlType::Q4_K, 2048), 8u * 144u);
    EXPECT_EQ(moe::row_bytes(moe::GgmlType::Q8_0, 64), 68u);
    EXPECT_EQ(moe::type_traits(4u).name, nullptr);   // removed type id
    EXPECT_EQ(moe::type_traits(1000u).name, nullptr);
}
