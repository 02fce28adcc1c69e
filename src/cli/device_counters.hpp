// The kernel's own counters for the block device holding a file
// (/sys/dev/block/MAJ:MIN/stat): sectors read and the time the device had
// any request in flight (io_ticks). The kernel stamps completions in its
// interrupt path, so this busy time does not include the engine's delay in
// taking completions; it does include every other reader and writer of the
// same device, which is why it is reported beside the engine's figures, not
// instead of them.
#pragma once

#include <cstdint>
#include <string>

namespace cli {

struct DeviceCounters {
    bool ok = false;
    uint64_t sectors_read = 0;  // 512-byte units whatever the device's block size
    uint64_t io_ticks_ms = 0;   // wall time with at least one request in flight
};

// "" when the file's device has no stat file (a virtual filesystem, say).
std::string device_stat_path(const std::string &file);
DeviceCounters read_device_counters(const std::string &stat_path);

}  // namespace cli
