// The expert cache's memory: one block, page aligned, placed by NUMA policy
// (by default on the node of the thread that opens the context, which is
// where the compute starts), backed by transparent huge pages where the
// kernel offers them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/numa_memory.hpp"

namespace moe {

class SlotArena {
public:
    SlotArena() = default;
    // Throws moe::Error(out_of_memory) naming the size when the mapping fails.
    explicit SlotArena(size_t bytes, NumaPlacement placement = NumaPlacement::local);

    uint8_t *data() const { return static_cast<uint8_t *>(memory_.data()); }
    size_t size() const { return memory_.size(); }
    // How the memory was placed, for logs ("node 0, huge pages").
    const std::string &placement() const { return memory_.placement(); }

    // Faults every page in now. Reads fill every slot soon anyway, and a page
    // first touched by a read is faulted and zeroed inside that read, on the
    // thread that submits it, in the middle of a token. (Not needed when the
    // arena is registered with io_uring: pinning faults it in already.)
    // Throws moe::Error(out_of_memory) when the memory cannot be had, which
    // is a clear error at open rather than a failure at some later token.
    void populate();

private:
    NumaBuffer memory_;
};

}  // namespace moe
