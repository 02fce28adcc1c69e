// The expert cache's memory: one block, page aligned, placed on the NUMA
// node of the thread that creates it (the thread that will compute with it),
// backed by transparent huge pages where the kernel offers them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace moe {

class SlotArena {
public:
    SlotArena() = default;
    // Throws moe::Error(out_of_memory) naming the size when the mapping fails.
    explicit SlotArena(size_t bytes);
    ~SlotArena();
    SlotArena(SlotArena &&other) noexcept;
    SlotArena &operator=(SlotArena &&other) noexcept;
    SlotArena(const SlotArena &) = delete;
    SlotArena &operator=(const SlotArena &) = delete;

    uint8_t *data() const { return data_; }
    size_t size() const { return size_; }
    // How the memory was placed, for logs ("node 0, huge pages").
    const std::string &placement() const { return placement_; }

    // Faults every page in now. Reads fill every slot soon anyway, and a page
    // first touched by a read is faulted and zeroed inside that read, on the
    // thread that submits it, in the middle of a token. (Not needed when the
    // arena is registered with io_uring: pinning faults it in already.)
    // Throws moe::Error(out_of_memory) when the memory cannot be had, which
    // is a clear error at open rather than a failure at some later token.
    void populate();

private:
    void reset() noexcept;
    uint8_t *data_ = nullptr;
    size_t size_ = 0;
    std::string placement_;
};

}  // namespace moe
