#include "experts/memory_pressure.hpp"

#include <chrono>
#include <cstdlib>
#include <string>
#include <utility>

#include "common/cgroup_memory.hpp"
#include "common/unique_fd.hpp"

#if defined(__linux__)
#include <fcntl.h>
#include <unistd.h>
#endif

namespace moe {

int64_t psi_some_total_us(std::string_view text) {
    size_t line = 0;
    while (line < text.size()) {
        size_t end = text.find('\n', line);
        if (end == std::string_view::npos) end = text.size();
        const std::string_view l = text.substr(line, end - line);
        if (l.substr(0, 5) == "some ") {
            const size_t at = l.find("total=");
            if (at == std::string_view::npos) return -1;
            int64_t v = 0;
            size_t i = at + 6, digits = 0;
            for (; i < l.size() && l[i] >= '0' && l[i] <= '9' && digits < 18; ++i, ++digits) v = v * 10 + (l[i] - '0');
            return digits ? v : -1;
        }
        line = end + 1;
    }
    return -1;
}

#if defined(__linux__)
namespace {

// The PSI file stays open; each poll rereads it from the start into a fixed
// buffer (no allocation per poll).
class PsiFile final : public MemoryPressure {
public:
    PsiFile(UniqueFd fd, int64_t total_us) : fd_(std::move(fd)), last_total_us_(total_us), last_(Clock::now()) {}

    const char *name() const override { return "psi"; }

    double stall_share() override {
        const int64_t total = read_total(fd_.get());
        const Clock::time_point now = Clock::now();
        if (total < 0) return -1;
        const double wall_us = std::chrono::duration<double, std::micro>(now - last_).count();
        const int64_t stalled = total - last_total_us_;
        last_total_us_ = total;
        last_ = now;
        if (wall_us <= 0 || stalled < 0) return 0;
        const double share = double(stalled) / wall_us;
        return share > 1 ? 1 : share;
    }

    // Asked once per step while stalls persist: the reader keeps its files
    // open and parses them without allocating.
    std::optional<uint64_t> available_bytes() override {
        const uint64_t available = available_.available_bytes();
        if (available == 0) return std::nullopt;
        return available;
    }

    static int64_t read_total(int fd) {
        char buf[512];
        if (::lseek(fd, 0, SEEK_SET) != 0) return -1;
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n <= 0) return -1;
        return psi_some_total_us(std::string_view(buf, size_t(n)));
    }

private:
    using Clock = std::chrono::steady_clock;
    UniqueFd fd_;
    int64_t last_total_us_;
    Clock::time_point last_;
    AvailableMemoryReader available_;
};

}  // namespace

std::unique_ptr<MemoryPressure> make_system_memory_pressure() {
    // The cgroup's own file first (a memory limit there stalls us long before
    // the system runs short); v2 mounted at /sys/fs/cgroup, or under
    // /sys/fs/cgroup/unified on hybrid hierarchies.
    std::string candidates[3];
    const std::string cg = own_cgroup_v2_path();
    if (!cg.empty()) {
        const std::string rel = (cg == "/" ? std::string() : cg) + "/memory.pressure";
        candidates[0] = "/sys/fs/cgroup" + rel;
        candidates[1] = "/sys/fs/cgroup/unified" + rel;
    }
    candidates[2] = "/proc/pressure/memory";
    for (const std::string &path : candidates) {
        if (path.empty()) continue;
        UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
        if (!fd) continue;
        const int64_t total = PsiFile::read_total(fd.get());
        if (total < 0) continue;
        return std::make_unique<PsiFile>(std::move(fd), total);
    }
    return nullptr;
}
#else
std::unique_ptr<MemoryPressure> make_system_memory_pressure() { return nullptr; }
#endif

}  // namespace moe
