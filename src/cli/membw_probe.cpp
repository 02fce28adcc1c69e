#include "membw_probe.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstring>
#include <optional>
#include <vector>

#include "os_handles.hpp"
#include "start_threads.hpp"
#include "stream_sum.hpp"

namespace cli {
namespace {

using Clock = std::chrono::steady_clock;
volatile uint64_t g_sink = 0;

}  // namespace

bool measure_memory_bandwidth(uint64_t buffer_bytes, int32_t threads, double seconds, MembwResult &out,
                              std::string &why) {
    threads = std::max(1, threads);
    const int32_t requested_threads = threads;
    const uint64_t slice = buffer_bytes / uint64_t(threads) / 4096 * 4096;
    if (slice == 0) {
        why = "buffer too small";
        return false;
    }
    const uint64_t mapped = slice * uint64_t(threads);
    const UniqueMapping mem(::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), mapped);
    if (!mem) {
        why = std::string("cannot map the probe buffer: ") + std::strerror(errno);
        return false;
    }
    std::memset(mem.data(), 1, mapped);  // fault every page in
    const bool avx2 = __builtin_cpu_supports("avx2");
    const auto *base = static_cast<const uint8_t *>(mem.data());
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> sink{0};
    std::vector<double> pass_seconds;
    Clock::time_point pass_start;
    const auto begin = Clock::now();
    // Each pass: every thread sums its slice; the barrier's completion step
    // times the pass and decides whether to go on.
    auto on_pass_end = [&]() noexcept {
        const auto now = Clock::now();
        if (!pass_seconds.empty() || pass_start != Clock::time_point{})
            pass_seconds.push_back(std::chrono::duration<double>(now - pass_start).count());
        const double elapsed = std::chrono::duration<double>(now - begin).count();
        if ((elapsed > seconds && pass_seconds.size() >= 3) || pass_seconds.size() >= 1000) stop = true;
        pass_start = Clock::now();
    };
    // The barrier counts the threads that started, so it is made once they
    // have: they wait for `go` first.
    std::optional<std::barrier<decltype(on_pass_end)>> sync;
    std::atomic<bool> go{false};
    auto worker = [&](int32_t id) {
        go.wait(false);
        const auto *p = reinterpret_cast<const uint64_t *>(base + uint64_t(id) * slice);
        uint64_t local = 0;
        sync->arrive_and_wait();  // start line
        while (!stop.load()) {
            local += stream_sum(p, slice / 8, avx2);
            sync->arrive_and_wait();
        }
        sink += local;
    };
    std::string refused;
    {
        std::vector<std::jthread> pool = start_threads(threads - 1, 1, worker, refused);
        threads = int32_t(pool.size()) + 1;
        sync.emplace(threads, on_pass_end);
        go = true;
        go.notify_all();
        worker(0);
    }  // joins the pool
    if (threads < requested_threads) why = refused;
    if (pass_seconds.empty()) {
        why = "no pass completed";
        return false;
    }
    std::sort(pass_seconds.begin(), pass_seconds.end());
    const uint64_t total = slice * uint64_t(threads);  // the slices of the threads that ran
    out.buffer_bytes = total;
    out.threads = threads;
    out.passes = int32_t(pass_seconds.size());
    out.bytes_per_s = double(total) / pass_seconds.front();
    out.median_bytes_per_s = double(total) / pass_seconds[pass_seconds.size() / 2];
    g_sink = sink.load();  // keeps the sums alive
    return true;
}

}  // namespace cli
