// Memory the process may still use: the machine's MemAvailable and the
// limits of the cgroup the process runs in (v2, or the v1 memory controller).
// Inside a container the machine's MemAvailable says nothing about what the
// process may use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace moe {

// The "0::/path" entry of /proc/self/cgroup (cgroup v2); empty if absent.
std::string own_cgroup_v2_path(const std::string &proc_cgroup = "/proc/self/cgroup");
// The path of the v1 hierarchy with the memory controller ("N:memory:/path",
// possibly among other controllers); empty if absent.
std::string own_cgroup_v1_memory_path(const std::string &proc_cgroup = "/proc/self/cgroup");

// Memory the cgroup and its ancestors still allow: over the levels from the
// process's cgroup up to the root of `mount` (the v2 hierarchy) that set
// memory.max, the least of memory.max - memory.current + the level's
// droppable page cache (memory.stat "file" less "shmem": the kernel reclaims
// it before it refuses memory). nullopt when no level sets a limit or v2 is
// not there.
std::optional<uint64_t> cgroup_memory_headroom(const std::string &cgroup_path,
                                               const std::string &mount = "/sys/fs/cgroup");
// The same for a v1 memory cgroup: memory.stat's hierarchical_memory_limit
// (which covers the ancestors) - memory.usage_in_bytes + total_cache -
// total_shmem. nullopt when unlimited or absent.
std::optional<uint64_t> cgroup_v1_memory_headroom(const std::string &cgroup_path,
                                                  const std::string &mount = "/sys/fs/cgroup/memory");
// This process's headroom: v2 (at /sys/fs/cgroup or, on hybrid systems,
// /sys/fs/cgroup/unified), else the v1 memory controller.
std::optional<uint64_t> process_cgroup_memory_headroom();

// MemAvailable in bytes from the text of /proc/meminfo; nullopt if absent.
std::optional<uint64_t> parse_mem_available(std::string_view meminfo);
// Memory the process may still fill, counting page cache the kernel can drop
// (the process's own mapped file pages among it) as free: MemAvailable
// (/proc/meminfo, falling back to sysconf's available pages) or the cgroup's
// headroom, whichever is less. 0 when neither can be read.
uint64_t process_available_memory();

// process_available_memory() and process_cgroup_memory_headroom() asked again
// and again without allocating: the mmap expert source asks once per step
// while memory stalls persist (experts/memory_pressure.cpp), i.e. on the
// per-token path exactly when memory is short. The files read stay open
// (PolledFile: each read sees what opening them afresh would) and are parsed
// in one fixed buffer. The cgroup is looked up again on each read, and only
// when the process has moved to another one are the files' names rebuilt.
class AvailableMemoryReader {
public:
    // Where the files are; tests point them at a hierarchy of their own.
    struct Sources {
        std::string meminfo = "/proc/meminfo";
        std::string proc_cgroup = "/proc/self/cgroup";
        // v2 hierarchies tried in order (the second on hybrid systems).
        static constexpr size_t kV2Mounts = 2;
        std::string v2_mounts[kV2Mounts] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
        std::string v1_mount = "/sys/fs/cgroup/memory";
    };
    AvailableMemoryReader() : AvailableMemoryReader(Sources{}) {}
    explicit AvailableMemoryReader(Sources sources);
    ~AvailableMemoryReader();
    AvailableMemoryReader(const AvailableMemoryReader &) = delete;
    AvailableMemoryReader &operator=(const AvailableMemoryReader &) = delete;

    uint64_t available_bytes();                  // as process_available_memory()
    std::optional<uint64_t> cgroup_headroom();   // as process_cgroup_memory_headroom()

private:
    struct Files;
    std::unique_ptr<Files> files_;
};

}  // namespace moe
