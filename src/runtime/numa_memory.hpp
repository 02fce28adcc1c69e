// Large buffers placed on NUMA nodes (libnuma), with transparent huge pages
// requested where the kernel offers them. Without NUMA support the memory is
// a plain page-aligned anonymous mapping.
#pragma once

#include <cstddef>

namespace moe {

enum class NumaPlacement {
    local,       // the node of the allocating thread
    interleave,  // pages spread over all nodes (shared read-mostly data)
    node,        // an explicit node
};

class NumaBuffer {
public:
    NumaBuffer() = default;
    // Allocates `bytes` (zero-filled). `node` is used with NumaPlacement::node.
    // Throws moe::Error(out_of_memory) on failure.
    NumaBuffer(size_t bytes, NumaPlacement placement, int node = -1);
    ~NumaBuffer();
    NumaBuffer(NumaBuffer &&other) noexcept;
    NumaBuffer &operator=(NumaBuffer &&other) noexcept;
    NumaBuffer(const NumaBuffer &) = delete;
    NumaBuffer &operator=(const NumaBuffer &) = delete;

    void *data() const { return data_; }
    size_t size() const { return size_; }
    // Whether a NUMA policy was applied (false: libnuma unavailable or one node).
    bool numa_placed() const { return numa_placed_; }
    // Whether huge pages were requested for the range.
    bool huge_pages_requested() const { return huge_; }

private:
    void release() noexcept;
    void *data_ = nullptr;
    size_t size_ = 0;      // bytes requested
    size_t mapped_ = 0;    // bytes mapped
    bool numa_placed_ = false;
    bool huge_ = false;
};

// Whether libnuma works on this machine.
bool numa_supported();

}  // namespace moe
