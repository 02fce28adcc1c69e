// A memory-limited cgroup for one child process, so the mmap baseline runs
// under the same memory as the streaming engine. cgroup v2 (memory.max) or,
// where only v1 is mounted, the v1 memory controller (memory.limit_in_bytes).
// Needs permission to create cgroups (usually root); callers say so and run
// unconstrained otherwise.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

namespace cli {

class MemoryCgroup {
public:
    // nullptr with `why` set when no limit can be set up here.
    static std::unique_ptr<MemoryCgroup> create(uint64_t limit_bytes, std::string &why);
    ~MemoryCgroup();  // removes the cgroup (its processes must have exited)
    MemoryCgroup(const MemoryCgroup &) = delete;
    MemoryCgroup &operator=(const MemoryCgroup &) = delete;

    // Moves a process (0 = the caller) into the cgroup.
    bool add(pid_t pid, std::string &why) const;
    const std::string &path() const { return path_; }
    const char *version() const { return v2_ ? "v2" : "v1"; }
    // Peak usage the controller recorded (0 if unknown).
    uint64_t peak_bytes() const;

private:
    MemoryCgroup(std::string path, bool v2) : path_(std::move(path)), v2_(v2) {}
    std::string path_;
    bool v2_;
};

}  // namespace cli
