#include <gtest/gtest.h>

#include <cstring>

#include "runtime/numa_memory.hpp"
#include "runtime/topology.hpp"
#include "support/paths.hpp"

namespace {

TEST(Topology, CountsAreSane) {
    EXPECT_GE(moe::topology::physical_cores(), 1);
    EXPECT_GE(moe::topology::numa_nodes(), 1);
}

TEST(Topology, NumaNodeOfPathIsUnknownOrAValidNode) {
    const int node = moe::topology::numa_node_of_path(moe::test::source_dir());
    EXPECT_GE(node, -1);
    EXPECT_LT(node, moe::topology::numa_nodes());
    EXPECT_EQ(moe::topology::numa_node_of_path("/nonexistent/path/for/test"), -1);
}

TEST(Topology, BindingToCoreZeroWorksOrIsRefused) {
    // May legitimately fail in restricted containers; must not crash.
    (void)moe::topology::bind_thread_to_core(0);
    (void)moe::topology::bind_thread_to_numa_node(0);
    SUCCEED();
}

TEST(NumaBuffer, AllocatesZeroedWritableMemory) {
    for (auto placement : {moe::NumaPlacement::local, moe::NumaPlacement::interleave}) {
        moe::NumaBuffer buf(5u << 20, placement);
        ASSERT_NE(buf.data(), nullptr);
        EXPECT_EQ(buf.size(), 5u << 20);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(buf.data()) % 4096, 0u);
        auto *p = static_cast<unsigned char *>(buf.data());
        EXPECT_EQ(p[0], 0);
        EXPECT_EQ(p[buf.size() - 1], 0);
        std::memset(p, 0xab, buf.size());
        moe::NumaBuffer moved = std::move(buf);
        EXPECT_EQ(buf.data(), nullptr);
        EXPECT_EQ(static_cast<unsigned char *>(moved.data())[12345], 0xab);
    }
    moe::NumaBuffer small(100, moe::NumaPlacement::node, 0);
    EXPECT_NE(small.data(), nullptr);
    EXPECT_THROW(moe::NumaBuffer(4096, moe::NumaPlacement::node, 100000), std::exception);
}

}  // namespace
