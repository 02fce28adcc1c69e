// Large buffers placed on NUMA nodes (libnuma), with transparent huge pages
// requested where the kernel offers them. The expert cache and the dense
// weights' copy live in them. Without NUMA support the memory is a plain
// page-aligned anonymous mapping.
#pragma once

#include <cstddef>
#include <string>

namespace moe {

enum class NumaPlacement {
    local,       // preferably the node of the allocating thread's CPU; a policy the process was given is kept
    interleave,  // pages spread over all nodes (those a process binding allows): every socket's
                 // memory bandwidth, for data all threads read
    node,        // preferably an explicit node
};

class NumaBuffer {
public:
    NumaBuffer() = default;
    // Allocates `bytes` (zero-filled). `node` is used with NumaPlacement::node.
    // The policy is a preference, not a binding: when the chosen node runs
    // out of memory the kernel takes pages elsewhere rather than failing
    // (unless the process was bound to nodes, e.g. numactl --membind).
    // Throws moe::Error(out_of_memory) when the mapping fails and
    // invalid_argument for a node that does not exist.
    NumaBuffer(size_t bytes, NumaPlacement placement, int node = -1);
    ~NumaBuffer();
    NumaBuffer(NumaBuffer &&other) noexcept;
    NumaBuffer &operator=(NumaBuffer &&other) noexcept;
    NumaBuffer(const NumaBuffer &) = delete;
    NumaBuffer &operator=(const NumaBuffer &) = delete;

    void *data() const { return data_; }
    size_t size() const { return size_; }
    // Whether a NUMA policy was applied (false: libnuma unavailable here, or
    // the kernel refused every policy tried).
    bool numa_placed() const { return numa_placed_; }
    // Whether huge pages were asked for and the kernel's THP mode can give them.
    bool huge_pages_requested() const { return huge_; }
    // For logs: "node 0, huge pages", "interleaved over 2 nodes", "no NUMA policy".
    const std::string &placement() const { return placement_; }

private:
    void release() noexcept;
    void *data_ = nullptr;
    size_t size_ = 0;      // bytes requested
    size_t mapped_ = 0;    // bytes mapped
    bool numa_placed_ = false;
    bool huge_ = false;
    std::string placement_;
};

// Whether libnuma works on this machine.
bool numa_supported();

}  // namespace moe
