#include "experts/memory_pressure.hpp"

#include <array>
#include <chrono>
#include <span>
#include <string>
#include <utility>

#include "common/cgroup_memory.hpp"
#include "common/polled_file.hpp"

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

// Room for a pressure file's lines (about 70 characters each).
constexpr size_t kPsiLineBytes = 256;

// The "some" line's total in the file's current text; -1 when the file
// cannot be read or has no such line.
int64_t read_some_total(PolledFile &file, std::span<char> scratch) {
    int64_t total = -1;
    const bool read = file.for_each_line(scratch, [&](std::string_view line) {
        if (line.substr(0, 5) != "some ") return true;
        total = psi_some_total_us(line);
        return false;
    });
    return read ? total : -1;
}

// The PSI file stays open as a PolledFile; each poll rereads it from the
// start into a fixed buffer (no allocation per poll).
class PsiFile final : public MemoryPressure {
public:
    PsiFile(PolledFile file, int64_t total_us)
        : file_(std::move(file)), last_total_us_(total_us), last_(Clock::now()) {}

    const char *name() const override { return "psi"; }

    double stall_share() override {
        const int64_t total = read_some_total(file_, scratch_);
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

private:
    using Clock = std::chrono::steady_clock;
    PolledFile file_;
    std::array<char, kPsiLineBytes> scratch_{};
    int64_t last_total_us_;
    Clock::time_point last_;
    AvailableMemoryReader available_;
};

}  // namespace

std::unique_ptr<MemoryPressure> make_psi_memory_pressure(const std::string &path) {
    PolledFile file(path);
    std::array<char, kPsiLineBytes> scratch;
    const int64_t total = read_some_total(file, scratch);
    if (total < 0) return nullptr;
    return std::make_unique<PsiFile>(std::move(file), total);
}

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
        if (auto pressure = make_psi_memory_pressure(path)) return pressure;
    }
    return nullptr;
}
#else
std::unique_ptr<MemoryPressure> make_psi_memory_pressure(const std::string &) { return nullptr; }
std::unique_ptr<MemoryPressure> make_system_memory_pressure() { return nullptr; }
#endif

}  // namespace moe
