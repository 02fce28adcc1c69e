// The expert cache's memory: one block, page aligned, placed on the NUMA
// node of the thread that creates it (the thread that will compute with it),
// backed by transparent huge pages where the kernel offers them, and faulted
// in when created (no read faults its destination mid-token).
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

private:
    void populate();
    void reset() noexcept;
    uint8_t *data_ = nullptr;
    size_t size_ = 0;
    std::string placement_;
};

}  // namespace moe
