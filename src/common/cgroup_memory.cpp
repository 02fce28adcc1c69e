#include "common/cgroup_memory.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <span>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "common/polled_file.hpp"

namespace moe {
namespace {

// One buffer for every file read here: their lines are short, except that a
// cgroup's path in /proc/self/cgroup may be as long as a path can be.
constexpr size_t kScratchBytes = 8192;
using Scratch = std::array<char, kScratchBytes>;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

// The whitespace-separated word of `text` at or after `at`; `at` moves past it.
std::string_view next_word(std::string_view text, size_t &at) {
    while (at < text.size() && is_space(text[at])) ++at;
    const size_t start = at;
    while (at < text.size() && !is_space(text[at])) ++at;
    return text.substr(start, at - start);
}

// Digits only; nullopt for anything else ("max") and for what overflows.
std::optional<uint64_t> parse_decimal(std::string_view word) {
    uint64_t value = 0;
    const char *end = word.data() + word.size();
    const auto [stop, ec] = std::from_chars(word.data(), end, value);
    if (word.empty() || ec != std::errc() || stop != end) return std::nullopt;
    return value;
}

// The file's first word as a number: nullopt when the file is missing or
// unreadable or the word is not a number ("max").
std::optional<uint64_t> read_number(PolledFile &file, Scratch &scratch) {
    std::optional<uint64_t> number;
    file.for_each_line(scratch, [&](std::string_view line) {
        size_t at = 0;
        const std::string_view word = next_word(line, at);
        if (word.empty()) return true;  // a blank line: the word comes later
        number = parse_decimal(word);
        return false;
    });
    return number;
}

// Calls on_entry(key, value) for the "key value" pairs of a memory.stat file
// in order, up to the first value that does not start with a digit or
// overflows. Words are taken as a stream read takes them (the reading this
// replaced): across lines, and a value's digits end where a non-digit
// starts the next word. False when the file cannot be read.
template <typename OnEntry>
bool for_each_stat_entry(PolledFile &file, Scratch &scratch, OnEntry &&on_entry) {
    // The key waiting for its value. The keys looked for are short: a longer
    // one is kept cut to the buffer's size, which matches none of them.
    char key[32];
    size_t key_size = 0;
    bool have_key = false;
    return file.for_each_line(scratch, [&](std::string_view line) {
        size_t at = 0;
        for (std::string_view word; !(word = next_word(line, at)).empty();) {
            if (!have_key) {
                key_size = std::min(word.size(), sizeof key);
                std::memcpy(key, word.data(), key_size);
                have_key = true;
                continue;
            }
            uint64_t value = 0;
            const auto [stop, ec] = std::from_chars(word.data(), word.data() + word.size(), value);
            if (ec != std::errc()) return false;
            on_entry(std::string_view(key, key_size), value);
            have_key = false;
            at -= size_t(word.data() + word.size() - stop);  // the rest of the word is the next word
        }
        return true;
    });
}

// Page cache the kernel can drop to make room: "file" less "shmem" (tmpfs
// and shared memory count as file pages but cannot be dropped without swap).
uint64_t reclaimable_file_bytes(PolledFile &stat, Scratch &scratch) {
    uint64_t file = 0, shmem = 0;
    for_each_stat_entry(stat, scratch, [&](std::string_view key, uint64_t value) {
        if (key == "file") file = value;
        else if (key == "shmem") shmem = value;
    });
    return file > shmem ? file - shmem : 0;
}

// The files of one level of a v2 hierarchy.
struct CgroupV2Level {
    PolledFile max, current, stat;
};

// The levels from the cgroup at `cgroup_path` up to the root of `mount`; none
// for a path that is not absolute.
std::vector<CgroupV2Level> cgroup_v2_levels(const std::string &cgroup_path, const std::string &mount) {
    std::vector<CgroupV2Level> levels;
    if (cgroup_path.empty() || cgroup_path[0] != '/') return levels;
    std::string rel = cgroup_path == "/" ? std::string() : cgroup_path;
    for (;;) {
        const std::string dir = mount + rel;
        levels.push_back({PolledFile(dir + "/memory.max"), PolledFile(dir + "/memory.current"),
                          PolledFile(dir + "/memory.stat")});
        if (rel.empty()) break;
        rel.resize(rel.find_last_of('/'));
    }
    return levels;
}

std::optional<uint64_t> cgroup_v2_headroom(std::span<CgroupV2Level> levels, Scratch &scratch) {
    std::optional<uint64_t> least;
    for (CgroupV2Level &level : levels) {
        if (const auto max = read_number(level.max, scratch)) {
            const uint64_t current = read_number(level.current, scratch).value_or(0);
            const uint64_t used = current - std::min(current, reclaimable_file_bytes(level.stat, scratch));
            const uint64_t room = *max > used ? *max - used : 0;
            if (!least || room < *least) least = room;
        }
    }
    return least;
}

// The files of a v1 memory cgroup; none (nothing to read) for a path that is
// not absolute.
struct CgroupV1Files {
    PolledFile stat, usage;
};

CgroupV1Files cgroup_v1_files(const std::string &cgroup_path, const std::string &mount) {
    if (cgroup_path.empty() || cgroup_path[0] != '/') return {};
    const std::string dir = mount + (cgroup_path == "/" ? std::string() : cgroup_path);
    return {PolledFile(dir + "/memory.stat"), PolledFile(dir + "/memory.usage_in_bytes")};
}

std::optional<uint64_t> cgroup_v1_headroom(CgroupV1Files &files, Scratch &scratch) {
    uint64_t limit = 0, cache = 0, shmem = 0;
    const bool readable = for_each_stat_entry(files.stat, scratch, [&](std::string_view key, uint64_t value) {
        if (key == "hierarchical_memory_limit") limit = value;
        else if (key == "total_cache") cache = value;
        else if (key == "total_shmem") shmem = value;
    });
    if (!readable) return std::nullopt;
    // "Unlimited" is the largest page-aligned value a long can hold.
    if (limit == 0 || limit >= (uint64_t{1} << 62)) return std::nullopt;
    const uint64_t usage = read_number(files.usage, scratch).value_or(0);
    const uint64_t droppable = cache > shmem ? cache - shmem : 0;
    const uint64_t used = usage - std::min(usage, droppable);
    return limit > used ? limit - used : 0;
}

// The cgroup paths on lines of /proc/self/cgroup: v2's "0::/path", and the
// v1 hierarchy whose controllers include memory ("N:cpu,memory:/path").
std::optional<std::string_view> cgroup_v2_path_of(std::string_view line) {
    if (line.substr(0, 3) != "0::") return std::nullopt;
    return line.substr(3);
}

std::optional<std::string_view> cgroup_v1_memory_path_of(std::string_view line) {
    const size_t a = line.find(':'), b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos) return std::nullopt;
    std::string_view controllers = line.substr(a + 1, b - a - 1);
    while (!controllers.empty()) {
        const size_t comma = controllers.find(',');
        if (controllers.substr(0, comma) == "memory") return line.substr(b + 1);
        controllers = comma == std::string_view::npos ? std::string_view() : controllers.substr(comma + 1);
    }
    return std::nullopt;
}

// The path on the first line of the file that `path_of` finds one on.
template <typename PathOf>
std::string own_cgroup_path(const std::string &proc_cgroup, PathOf path_of) {
    Scratch scratch;
    PolledFile file(proc_cgroup);
    std::string path;
    file.for_each_line(scratch, [&](std::string_view line) {
        const std::optional<std::string_view> found = path_of(line);
        if (found) path = *found;
        return !found;
    });
    return path;
}

constexpr std::string_view kMemAvailable = "MemAvailable:";

// The bytes on /proc/meminfo's MemAvailable line (which starts with the key);
// nullopt when the number is missing or too large.
std::optional<uint64_t> mem_available_of(std::string_view line) {
    line.remove_prefix(kMemAvailable.size());
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

}  // namespace

std::string own_cgroup_v1_memory_path(const std::string &proc_cgroup) {
    return own_cgroup_path(proc_cgroup, cgroup_v1_memory_path_of);
}

std::string own_cgroup_v2_path(const std::string &proc_cgroup) {
    return own_cgroup_path(proc_cgroup, cgroup_v2_path_of);
}

std::optional<uint64_t> cgroup_memory_headroom(const std::string &cgroup_path, const std::string &mount) {
    Scratch scratch;
    std::vector<CgroupV2Level> levels = cgroup_v2_levels(cgroup_path, mount);
    return cgroup_v2_headroom(levels, scratch);
}

std::optional<uint64_t> cgroup_v1_memory_headroom(const std::string &cgroup_path, const std::string &mount) {
    Scratch scratch;
    CgroupV1Files files = cgroup_v1_files(cgroup_path, mount);
    return cgroup_v1_headroom(files, scratch);
}

std::optional<uint64_t> process_cgroup_memory_headroom() { return AvailableMemoryReader().cgroup_headroom(); }

std::optional<uint64_t> parse_mem_available(std::string_view meminfo) {
    size_t at = 0;
    while (at < meminfo.size()) {
        const size_t eol = std::min(meminfo.find('\n', at), meminfo.size());
        const std::string_view line = meminfo.substr(at, eol - at);
        at = eol + 1;
        if (line.substr(0, kMemAvailable.size()) == kMemAvailable) return mem_available_of(line);
    }
    return std::nullopt;
}

uint64_t process_available_memory() { return AvailableMemoryReader().available_bytes(); }

struct AvailableMemoryReader::Files {
    explicit Files(Sources s) : sources(std::move(s)), meminfo(sources.meminfo), proc_cgroup(sources.proc_cgroup) {
        locate();
    }

    // Names the files of the cgroups /proc/self/cgroup gives now.
    void locate() {
        v2_path = own_cgroup_v2_path(sources.proc_cgroup);
        v1_path = own_cgroup_v1_memory_path(sources.proc_cgroup);
        for (size_t i = 0; i < Sources::kV2Mounts; ++i) v2_levels[i] = cgroup_v2_levels(v2_path, sources.v2_mounts[i]);
        v1 = cgroup_v1_files(v1_path, sources.v1_mount);
    }

    // Whether /proc/self/cgroup now gives other cgroups than those located
    // (compared in place, without allocating).
    bool moved() {
        std::optional<std::string_view> v2_now, v1_now;
        bool same = true;
        proc_cgroup.for_each_line(scratch, [&](std::string_view line) {
            if (!v2_now && (v2_now = cgroup_v2_path_of(line))) same = same && *v2_now == v2_path;
            if (!v1_now && (v1_now = cgroup_v1_memory_path_of(line))) same = same && *v1_now == v1_path;
            return !(v2_now && v1_now);
        });
        // A path not found now reads as "" (as own_cgroup_*_path give it).
        if (!v2_now) same = same && v2_path.empty();
        if (!v1_now) same = same && v1_path.empty();
        return !same;
    }

    Sources sources;
    PolledFile meminfo, proc_cgroup;
    std::string v2_path, v1_path;
    std::vector<CgroupV2Level> v2_levels[Sources::kV2Mounts];
    CgroupV1Files v1;
    Scratch scratch;
};

AvailableMemoryReader::AvailableMemoryReader(Sources sources) : files_(std::make_unique<Files>(std::move(sources))) {}
AvailableMemoryReader::~AvailableMemoryReader() = default;

std::optional<uint64_t> AvailableMemoryReader::cgroup_headroom() {
    Files &f = *files_;
    if (f.moved()) f.locate();  // allocates, but only when the process has moved
    for (std::vector<CgroupV2Level> &levels : f.v2_levels)
        if (const auto room = cgroup_v2_headroom(levels, f.scratch)) return room;
    return cgroup_v1_headroom(f.v1, f.scratch);
}

uint64_t AvailableMemoryReader::available_bytes() {
    Files &f = *files_;
    uint64_t available = 0;
    f.meminfo.for_each_line(f.scratch, [&](std::string_view line) {
        if (line.substr(0, kMemAvailable.size()) != kMemAvailable) return true;
        available = mem_available_of(line).value_or(0);
        return false;
    });
    if (available == 0) {
        const long pages = ::sysconf(_SC_AVPHYS_PAGES);
        const long page_size = ::sysconf(_SC_PAGESIZE);
        if (pages > 0 && page_size > 0) available = uint64_t(pages) * uint64_t(page_size);
    }
    // In a container the cgroup's limit binds long before the machine runs short.
    if (const auto room = cgroup_headroom()) available = std::min(available, *room);
    return available;
}

}  // namespace moe
