// Portable backend: a pool of threads issuing blocking pread(2) calls. The
// threads run on the CPUs near the storage device of the files they read
// (common/topology.hpp), so their completions land close to the device.
#include <unistd.h>

#include <algorithm>
#include <iterator>

#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "common/topology.hpp"
#include "io/read_backend.hpp"

namespace moe::io {
namespace {

// Fixed-capacity FIFO (no allocation after construction).
template <typename T>
class Ring {
public:
    explicit Ring(size_t capacity) : items_(capacity) {}
    bool empty() const { return count_ == 0; }
    size_t size() const { return count_; }
    void push(const T &v) {
        items_[(head_ + count_) % items_.size()] = v;
        ++count_;
    }
    T pop() {
        T v = items_[head_];
        head_ = (head_ + 1) % items_.size();
        --count_;
        return v;
    }
    T &at(size_t i) { return items_[(head_ + i) % items_.size()]; }

private:
    std::vector<T> items_;
    size_t head_ = 0, count_ = 0;
};

class PreadBackend final : public ReadBackend {
public:
    PreadBackend(uint32_t depth, uint32_t n_threads) : depth_(depth), pending_(depth), done_(depth) {
        if (depth == 0) fail(Status::invalid_argument, "pread backend: queue depth must be positive");
        if (n_threads == 0) n_threads = depth < 8 ? depth : 8;
        workers_.reserve(n_threads);
        try {
            for (uint32_t i = 0; i < n_threads; ++i) workers_.emplace_back([this] { work(); });
        } catch (const std::exception &e) {
            // A thread that cannot start (a pids limit, no room for its
            // stack) must not leave the ones started joinable: destroying
            // them would call std::terminate.
            stop_workers();
            fail(Status::out_of_memory, "pread backend: cannot start %u threads: %s", n_threads, e.what());
        }
    }
    ~PreadBackend() override { stop_workers(); }

    const char *name() const override { return "pread"; }
    uint32_t add_file(int fd) override {
        uint32_t index;
        {
            std::lock_guard lock(mu_);
            fds_.push_back(fd);
            index = static_cast<uint32_t>(fds_.size() - 1);
        }
        place_threads_near(fd);
        return index;
    }
    uint32_t queue_depth() const override { return depth_; }
    uint32_t in_flight() const override { return in_flight_; }

    void submit(const ReadRequest &r) override {
        if (in_flight_ >= depth_) fail(Status::internal, "pread backend: submit with a full queue (%u)", depth_);
        {
            std::lock_guard lock(mu_);
            if (r.file >= fds_.size()) fail(Status::internal, "pread backend: unknown file index %u", r.file);
            pending_.push(Item{r, false});
        }
        ++in_flight_;
        work_cv_.notify_one();
    }

    void cancel(uint64_t tag) override {
        std::lock_guard lock(mu_);
        for (size_t i = 0; i < pending_.size(); ++i)
            if (pending_.at(i).request.tag == tag) pending_.at(i).cancelled = true;
    }

    size_t reap(std::span<ReadCompletion> out, bool wait) override {
        std::unique_lock lock(mu_);
        if (wait && in_flight_ > 0) done_cv_.wait(lock, [&] { return !done_.empty(); });
        size_t n = 0;
        while (n < out.size() && !done_.empty()) out[n++] = done_.pop();
        in_flight_ -= static_cast<uint32_t>(n);
        return n;
    }

private:
    struct Item {
        ReadRequest request;
        bool cancelled;
    };

    void stop_workers() {
        {
            std::lock_guard lock(mu_);
            stop_ = true;
        }
        work_cv_.notify_all();
        for (auto &t : workers_) t.join();
    }

    void work() {
        std::unique_lock lock(mu_);
        for (;;) {
            work_cv_.wait(lock, [&] { return stop_ || !pending_.empty(); });
            if (stop_) return;
            Item item = pending_.pop();
            const int fd = fds_[item.request.file];
            lock.unlock();
            const int64_t result = item.cancelled ? -ECANCELED : read_fully(fd, item.request);
            lock.lock();
            done_.push(ReadCompletion{item.request.tag, result});
            done_cv_.notify_one();
        }
    }

    // Widens the workers' CPU set to cover the device behind `fd` (files on
    // several devices: the union of their CPUs). Binding is best effort.
    void place_threads_near(int fd) {
        const std::vector<int> near = topology::placement_for_fd(fd).cpus;
        std::vector<int> cpus;
        std::set_union(cpus_.begin(), cpus_.end(), near.begin(), near.end(), std::back_inserter(cpus));
        if (cpus == cpus_) return;
        cpus_ = std::move(cpus);
        for (auto &t : workers_) topology::bind_thread_to_cpus(t, cpus_);
    }

    static int64_t read_fully(int fd, const ReadRequest &r) {
        uint64_t got = 0;
        while (got < r.length) {
            const ssize_t n = ::pread(fd, r.dest + got, r.length - got, static_cast<off_t>(r.offset + got));
            if (n < 0) {
                if (errno == EINTR) continue;
                return -errno;
            }
            if (n == 0) break;  // end of file
            got += static_cast<uint64_t>(n);
        }
        return static_cast<int64_t>(got);
    }

    const uint32_t depth_;
    uint32_t in_flight_ = 0;  // caller thread only
    std::mutex mu_;
    std::condition_variable work_cv_, done_cv_;
    bool stop_ = false;
    std::vector<int> fds_;
    Ring<Item> pending_;
    Ring<ReadCompletion> done_;
    std::vector<std::thread> workers_;
    std::vector<int> cpus_;  // where the workers are bound (caller thread only)
};

}  // namespace

std::unique_ptr<ReadBackend> make_pread_backend(uint32_t queue_depth, uint32_t n_threads) {
    return std::make_unique<PreadBackend>(queue_depth, n_threads);
}

}  // namespace moe::io
