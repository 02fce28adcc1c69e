#include "common/cgroup_memory.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string_view>

namespace moe {
namespace {

std::optional<uint64_t> read_number(const std::string &path) {
    std::ifstream in(path);
    std::string word;
    if (!(in >> word) || word.empty() || word.find_first_not_of("0123456789") != std::string::npos)
        return std::nullopt;  // missing, unreadable, or "max"
    try {
        return std::stoull(word);
    } catch (...) {
        return std::nullopt;
    }
}

// Page cache the kernel can drop to make room: "file" less "shmem" (tmpfs
// and shared memory count as file pages but cannot be dropped without swap).
uint64_t reclaimable_file_bytes(const std::string &stat_path) {
    std::ifstream in(stat_path);
    std::string key;
    uint64_t value = 0, file = 0, shmem = 0;
    while (in >> key >> value) {
        if (key == "file") file = value;
        else if (key == "shmem") shmem = value;
    }
    return file > shmem ? file - shmem : 0;
}

}  // namespace

std::string own_cgroup_v1_memory_path(const std::string &proc_cgroup) {
    std::ifstream in(proc_cgroup);
    std::string line;
    while (std::getline(in, line)) {
        const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
        if (b == std::string::npos) continue;
        std::string_view controllers(line.data() + a + 1, b - a - 1);
        while (!controllers.empty()) {
            const size_t comma = controllers.find(',');
            if (controllers.substr(0, comma) == "memory") return line.substr(b + 1);
            controllers = comma == std::string_view::npos ? std::string_view() : controllers.substr(comma + 1);
        }
    }
    return {};
}

std::string own_cgroup_v2_path(const std::string &proc_cgroup) {
    std::ifstream in(proc_cgroup);
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("0::", 0) == 0) return line.substr(3);
    return {};
}

std::optional<uint64_t> cgroup_memory_headroom(const std::string &cgroup_path, const std::string &mount) {
    if (cgroup_path.empty() || cgroup_path[0] != '/') return std::nullopt;
    std::optional<uint64_t> least;
    std::string rel = cgroup_path == "/" ? std::string() : cgroup_path;
    for (;;) {
        const std::string dir = mount + rel;
        if (const auto max = read_number(dir + "/memory.max")) {
            const uint64_t current = read_number(dir + "/memory.current").value_or(0);
            const uint64_t used = current - std::min(current, reclaimable_file_bytes(dir + "/memory.stat"));
            const uint64_t room = *max > used ? *max - used : 0;
            if (!least || room < *least) least = room;
        }
        if (rel.empty()) break;
        rel.resize(rel.find_last_of('/'));
    }
    return least;
}

std::optional<uint64_t> cgroup_v1_memory_headroom(const std::string &cgroup_path, const std::string &mount) {
    if (cgroup_path.empty() || cgroup_path[0] != '/') return std::nullopt;
    const std::string dir = mount + (cgroup_path == "/" ? std::string() : cgroup_path);
    std::ifstream in(dir + "/memory.stat");
    if (!in) return std::nullopt;
    std::string key;
    uint64_t value = 0, limit = 0, cache = 0, shmem = 0;
    while (in >> key >> value) {
        if (key == "hierarchical_memory_limit") limit = value;
        else if (key == "total_cache") cache = value;
        else if (key == "total_shmem") shmem = value;
    }
    // "Unlimited" is the largest page-aligned value a long can hold.
    if (limit == 0 || limit >= (uint64_t{1} << 62)) return std::nullopt;
    const uint64_t usage = read_number(dir + "/memory.usage_in_bytes").value_or(0);
    const uint64_t droppable = cache > shmem ? cache - shmem : 0;
    const uint64_t used = usage - std::min(usage, droppable);
    return limit > used ? limit - used : 0;
}

std::optional<uint64_t> process_cgroup_memory_headroom() {
    const std::string v2 = own_cgroup_v2_path();
    for (const char *mount : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"})
        if (const auto room = cgroup_memory_headroom(v2, mount)) return room;
    return cgroup_v1_memory_headroom(own_cgroup_v1_memory_path());
}

std::optional<uint64_t> parse_mem_available(std::string_view meminfo) {
    constexpr std::string_view kKey = "MemAvailable:";
    size_t at = 0;
    while (at < meminfo.size()) {
        const size_t eol = std::min(meminfo.find('\n', at), meminfo.size());
        std::string_view line = meminfo.substr(at, eol - at);
        at = eol + 1;
        if (line.substr(0, kKey.size()) != kKey) continue;
        line.remove_prefix(kKey.size());
        while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
        uint64_t kib = 0;
        size_t digits = 0;
        while (digits < line.size() && line[digits] >= '0' && line[digits] <= '9') {
            if (kib > (UINT64_MAX >> 10) / 10) return std::nullopt;
            kib = kib * 10 + uint64_t(line[digits] - '0');
            ++digits;
        }
        if (digits == 0) return std::nullopt;
        return kib << 10;  // the kernel reports kB meaning KiB
    }
    return std::nullopt;
}

uint64_t process_available_memory() {
    uint64_t available = 0;
    std::ifstream meminfo("/proc/meminfo");
    if (meminfo) {
        const std::string text((std::istreambuf_iterator<char>(meminfo)), std::istreambuf_iterator<char>());
        available = parse_mem_available(text).value_or(0);
    }
    if (available == 0) {
        const long pages = ::sysconf(_SC_AVPHYS_PAGES);
        const long page_size = ::sysconf(_SC_PAGESIZE);
        if (pages > 0 && page_size > 0) available = uint64_t(pages) * uint64_t(page_size);
    }
    // In a container the cgroup's limit binds long before the machine runs short.
    if (const auto room = process_cgroup_memory_headroom()) available = std::min(available, *room);
    return available;
}

}  // namespace moe
