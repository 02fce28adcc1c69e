// How hard the system (or the process's memory cgroup) is struggling for
// memory right now, as the share of wall time tasks stalled waiting for it,
// and how much memory the process could still fill. The mmap expert source
// polls this to give pages back before the kernel starts evicting weights it
// picks itself (possibly dense ones every token needs). Behind a small
// interface so the reaction can be tested with a scripted fake; systems
// without the signal get no probe and no reaction.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace moe {

class MemoryPressure {
public:
    virtual ~MemoryPressure() = default;
    virtual const char *name() const = 0;
    // Share of wall time in [0, 1] during which some task stalled on memory
    // since the previous call (the first call measures from creation);
    // negative when the signal could not be read this time.
    virtual double stall_share() = 0;
    // Bytes the process could still fill, counting page cache the kernel can
    // drop (the process's own mapped weights among it) as free; nullopt when
    // unknown. Stalls alone cannot say whose shortage they are: the system's
    // signal counts every task's, and filling the page cache or compacting
    // huge pages stalls even with memory to spare. Asked only once stalls
    // persist, so the steady path reads nothing but the stall signal.
    virtual std::optional<uint64_t> available_bytes() = 0;
};

// The "some" line's cumulative stall time in microseconds from the text of a
// Linux pressure-stall file ("some avg10=.. avg60=.. avg300=.. total=N"), or
// -1 when the text has none.
int64_t psi_some_total_us(std::string_view text);

// Linux: stalls from the pressure-stall file at `path` (its "some" line),
// read as a PolledFile: each poll sees what opening the file afresh would
// show, a file replaced since included. Null when the file cannot be read or
// has no "some" line now, and off Linux.
std::unique_ptr<MemoryPressure> make_psi_memory_pressure(const std::string &path);

// Linux: the memory.pressure file of the process's cgroup (v2) when readable,
// otherwise /proc/pressure/memory; available bytes as
// process_available_memory() gives them (MemAvailable, or the cgroup's
// headroom when less), read by an AvailableMemoryReader without allocating.
// Null when no stall signal can be read (no PSI in the kernel, not Linux):
// the caller then simply does not react.
std::unique_ptr<MemoryPressure> make_system_memory_pressure();

}  // namespace moe
