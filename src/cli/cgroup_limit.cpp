#include "cgroup_limit.hpp"
#include "os_handles.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace cli {
namespace {

constexpr long kCgroup2Magic = 0x63677270;

bool write_file(const std::string &path, const std::string &text, std::string &why) {
    const UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd) {
        why = path + ": " + std::strerror(errno);
        return false;
    }
    const ssize_t n = ::write(fd.get(), text.data(), text.size());
    const int err = errno;
    if (n != static_cast<ssize_t>(text.size())) {
        why = path + ": " + std::strerror(err);
        return false;
    }
    return true;
}

bool is_cgroup2(const char *path) {
    struct statfs fs {};
    return ::statfs(path, &fs) == 0 && static_cast<long>(fs.f_type) == kCgroup2Magic;
}

std::string unique_name() {
    static std::atomic<int> counter{0};
    return "moestream-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

}  // namespace

std::unique_ptr<MemoryCgroup> MemoryCgroup::create(uint64_t limit_bytes, std::string &why) {
    const std::string limit = std::to_string(limit_bytes);
    // cgroup v2 mounted at /sys/fs/cgroup with the memory controller delegated to children.
    if (is_cgroup2("/sys/fs/cgroup")) {
        std::ifstream controllers("/sys/fs/cgroup/cgroup.subtree_control");
        std::string text((std::istreambuf_iterator<char>(controllers)), std::istreambuf_iterator<char>());
        if (text.find("memory") == std::string::npos) {
            std::string ignored;
            write_file("/sys/fs/cgroup/cgroup.subtree_control", "+memory", ignored);
        }
        const std::string dir = "/sys/fs/cgroup/" + unique_name();
        if (::mkdir(dir.c_str(), 0755) != 0) {
            why = "cannot create " + dir + ": " + std::strerror(errno);
            return nullptr;
        }
        std::unique_ptr<MemoryCgroup> cg(new MemoryCgroup(dir, true));
        if (!write_file(dir + "/memory.max", limit, why)) return nullptr;
        std::string ignored;
        write_file(dir + "/memory.swap.max", "0", ignored);
        return cg;
    }
    const char *v1 = "/sys/fs/cgroup/memory";
    if (::access(v1, W_OK) == 0) {
        const std::string dir = std::string(v1) + "/" + unique_name();
        if (::mkdir(dir.c_str(), 0755) != 0) {
            why = "cannot create " + dir + ": " + std::strerror(errno);
            return nullptr;
        }
        std::unique_ptr<MemoryCgroup> cg(new MemoryCgroup(dir, false));
        if (!write_file(dir + "/memory.limit_in_bytes", limit, why)) return nullptr;
        return cg;
    }
    why = "no writable cgroup memory controller (/sys/fs/cgroup is not cgroup v2 and " + std::string(v1) +
          " is not writable)";
    return nullptr;
}

MemoryCgroup::~MemoryCgroup() {
    // The kernel refuses while processes remain; the child has exited by now.
    for (int attempt = 0; attempt < 50 && ::rmdir(path_.c_str()) != 0 && errno == EBUSY; ++attempt) ::usleep(20000);
}

bool MemoryCgroup::add(pid_t pid, std::string &why) const {
    return write_file(path_ + "/cgroup.procs", std::to_string(pid == 0 ? ::getpid() : pid), why);
}

uint64_t MemoryCgroup::peak_bytes() const {
    std::ifstream f(path_ + (v2_ ? "/memory.peak" : "/memory.max_usage_in_bytes"));
    uint64_t v = 0;
    f >> v;
    return v;
}

}  // namespace cli
