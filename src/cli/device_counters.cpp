#include "device_counters.hpp"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <fstream>

namespace cli {

std::string device_stat_path(const std::string &file) {
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0) return "";
    const std::string path = "/sys/dev/block/" + std::to_string(major(st.st_dev)) + ":" +
                             std::to_string(minor(st.st_dev)) + "/stat";
    return std::ifstream(path).good() ? path : "";
}

DeviceCounters read_device_counters(const std::string &stat_path) {
    DeviceCounters c;
    if (stat_path.empty()) return c;
    std::ifstream f(stat_path);
    // read I/Os, read merges, sectors read, read ticks, write I/Os, write merges,
    // sectors written, write ticks, in flight, io_ticks, ... (Documentation/block/stat.rst)
    uint64_t v[10] = {};
    for (uint64_t &x : v)
        if (!(f >> x)) return c;
    c.sectors_read = v[2];
    c.io_ticks_ms = v[9];
    c.ok = true;
    return c;
}

}  // namespace cli
