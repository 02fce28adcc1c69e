// Thread pool protocol.
//
// state = generation << 17 | closed << 16 | active workers. parallel_for
// publishes a job by storing a new generation (closed = 0, active = 0) and
// bumping `epoch`, the word idle workers spin or futex-wait on. A worker joins
// the current generation by incrementing `active` with a CAS that fails once
// the generation is closed; the caller closes it after the last task has been
// handed out and waits only for the workers that joined. So a worker still
// asleep never delays the caller, and never sees a job that has returned.
//
// Tasks are handed out from contiguous ranges, one per worker: worker w
// starts on the w-th slice of [0, n) and walks it in order, so consecutive
// tasks of one thread are neighbouring rows of one matrix and its memory
// streams (and the kernels' prefetches past a task's end) carry on from one
// task into the next instead of restarting cold at every task. A worker whose
// range is empty steals the back half of the largest remaining range, which
// keeps the threads balanced and lets the others take over the slice of a
// worker that never woke up.
#include "common/thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "common/topology.hpp"

namespace moe {
namespace {

constexpr uint64_t kActiveMask = 0xffff;
constexpr uint64_t kClosed = 1ull << 16;
constexpr int kGenShift = 17;
constexpr int32_t kMaxThreads = 4096;

// A range of task indices [begin, end) packed in one word so the owner (from
// the front) and thieves (from the back) change it with one CAS.
constexpr uint64_t pack_range(uint64_t begin, uint64_t end) { return begin << 32 | end; }
constexpr uint32_t range_begin(uint64_t r) { return static_cast<uint32_t>(r >> 32); }
constexpr uint32_t range_end(uint64_t r) { return static_cast<uint32_t>(r); }

struct alignas(64) TaskRange {
    std::atomic<uint64_t> packed{0};
};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

int64_t env_int(const char *name, int64_t fallback) {
    const char *v = std::getenv(name);
    if (!v || !*v) return fallback;
    char *end = nullptr;
    const long long x = std::strtoll(v, &end, 10);
    return (end && *end == 0 && x >= 0) ? x : fallback;
}

// Microseconds from the environment as nanoseconds, saturated: a huge value
// means "spin for ever", and x * 1000 must not wrap to a negative time.
int64_t env_us_as_ns(const char *name, int64_t fallback_us) {
    return std::min<int64_t>(env_int(name, fallback_us), INT64_MAX / 1000) * 1000;
}

}  // namespace

struct ThreadPool::Impl {
    int32_t n_threads = 1;
    int64_t spin_ns = 0;
    std::vector<std::thread> threads;
    std::vector<int> cores;  // cores[w - 1]: worker w's core when pinned (claimed, released with the pool)

    Impl() = default;
    Impl(const Impl &) = delete;
    Impl &operator=(const Impl &) = delete;
    ~Impl() { topology::release_cores(cores); }  // the threads have been joined

    // The current job; written by the caller before publishing a generation.
    const TaskRef *job = nullptr;
    int64_t n_tasks = 0;
    std::exception_ptr error;  // first exception of the job (guarded by error_mutex)
    std::mutex error_mutex;

    std::unique_ptr<TaskRange[]> ranges;  // one per worker
    alignas(64) std::atomic<uint64_t> state{0};
    alignas(64) std::atomic<uint32_t> epoch{0};
    alignas(64) std::atomic<int32_t> sleepers{0};
    std::atomic<bool> failed{false};
    std::atomic<bool> stopping{false};
    bool own_tasks_only = false;  // the job's task w must run on worker w (no stealing)
    int64_t step_spin_ns = 0;          // spin limit while a step is open (>= spin_ns)
    std::atomic<int32_t> open_steps{0};  // StepScopes open
    std::atomic<uint64_t> sleeps{0};
    uint64_t generation = 0;  // caller side only

    // The next task of worker's own range, or -1 when it is empty.
    int64_t take_own(int32_t worker) {
        std::atomic<uint64_t> &r = ranges[size_t(worker)].packed;
        uint64_t v = r.load(std::memory_order_acquire);
        for (;;) {
            const uint32_t b = range_begin(v), e = range_end(v);
            if (b >= e) return -1;
            if (r.compare_exchange_weak(v, pack_range(b + 1, e), std::memory_order_acq_rel, std::memory_order_acquire))
                return b;
        }
    }

    // Moves the back half of the largest other range into worker's own
    // (empty) range; false when every range is empty.
    bool steal(int32_t worker) {
        for (;;) {
            int32_t victim = -1;
            uint32_t most = 0;
            for (int32_t w = 0; w < n_threads; ++w) {
                if (w == worker) continue;
                const uint64_t v = ranges[size_t(w)].packed.load(std::memory_order_acquire);
                const uint32_t left = range_end(v) > range_begin(v) ? range_end(v) - range_begin(v) : 0;
                if (left > most) most = left, victim = w;
            }
            if (victim < 0) return false;
            std::atomic<uint64_t> &r = ranges[size_t(victim)].packed;
            uint64_t v = r.load(std::memory_order_acquire);
            const uint32_t b = range_begin(v), e = range_end(v);
            if (b >= e) continue;  // emptied meanwhile: look again
            const uint32_t mid = b + (e - b) / 2;  // the owner keeps [b, mid); one task left: take it
            if (r.compare_exchange_strong(v, pack_range(b, mid), std::memory_order_acq_rel, std::memory_order_acquire)) {
                ranges[size_t(worker)].packed.store(pack_range(mid, e), std::memory_order_release);
                return true;
            }
        }
    }

    void run_tasks(int32_t worker) {
        const TaskRef &fn = *job;
        for (;;) {
            if (failed.load(std::memory_order_relaxed)) return;  // hand out nothing more
            const int64_t t = take_own(worker);
            if (t < 0) {
                if (own_tasks_only || !steal(worker)) return;
                continue;
            }
            try {
                fn(t, worker);
            } catch (...) {
                std::lock_guard<std::mutex> lock(error_mutex);
                if (!error) error = std::current_exception();
                failed.store(true, std::memory_order_relaxed);
            }
        }
    }

    // Publishes a job of n tasks (ranges already set) and wakes the workers.
    void publish(const TaskRef &fn, int64_t tasks);
    // Closes the job once its tasks are handed out, waits for the workers in
    // it and rethrows the first exception of a task.
    void finish();

    // Returns the first epoch different from `seen`: spins first, then sleeps.
    uint32_t wait_for_epoch(uint32_t seen) {
        if (spin_ns > 0) {
            const auto start = std::chrono::steady_clock::now();
            for (uint32_t i = 1;; ++i) {
                const uint32_t e = epoch.load(std::memory_order_acquire);
                if (e != seen) return e;
                cpu_relax();
                if ((i & 255) != 0) continue;
                const int64_t spun =
                    std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
                        .count();
                const int64_t limit = open_steps.load(std::memory_order_relaxed) > 0 ? step_spin_ns : spin_ns;
                if (spun > limit) break;
            }
        }
        sleeps.fetch_add(1, std::memory_order_relaxed);
        sleepers.fetch_add(1, std::memory_order_seq_cst);
        uint32_t e;
        while ((e = epoch.load(std::memory_order_seq_cst)) == seen) epoch.wait(seen, std::memory_order_seq_cst);
        sleepers.fetch_sub(1, std::memory_order_relaxed);
        return e;
    }

    void worker_main(int32_t worker) {
        if (size_t(worker - 1) < cores.size()) topology::bind_thread_to_core(cores[size_t(worker - 1)]);
        uint32_t seen = 0;
        for (;;) {
            const uint32_t e = wait_for_epoch(seen);
            seen = e;
            if (stopping.load(std::memory_order_acquire)) return;
            uint64_t s = state.load(std::memory_order_acquire);
            while (static_cast<uint32_t>(s >> kGenShift) == e && !(s & kClosed)) {
                if (state.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
                    run_tasks(worker);
                    state.fetch_sub(1, std::memory_order_release);
                    break;
                }
            }
        }
    }
};

ThreadPool::ThreadPool(int32_t n_threads) : impl_(std::make_unique<Impl>()) {
    if (n_threads < 0) fail(Status::invalid_argument, "thread pool: negative thread count %d", n_threads);
    if (n_threads == 0) n_threads = topology::physical_cores();
    n_threads = std::min(n_threads, kMaxThreads);
    Impl &im = *impl_;
    im.n_threads = n_threads;
    im.ranges = std::make_unique<TaskRange[]>(size_t(n_threads));
    // The CPUs this process may run on (affinity, cgroup cpuset), not the
    // machine's: spinning workers on too few CPUs hold them from the others.
    const int32_t cpus = static_cast<int32_t>(topology::allowed_cpus().size());
    const bool oversubscribed = n_threads > cpus;
    im.spin_ns = env_us_as_ns("MOESTREAM_SPIN_US", oversubscribed ? 0 : 200);
    // A pool that never spins does not spin within steps either.
    im.step_spin_ns =
        im.spin_ns > 0 ? std::max(im.spin_ns, env_us_as_ns("MOESTREAM_STEP_SPIN_US", 0)) : 0;
    const char *no_pin = std::getenv("MOESTREAM_NO_PIN");
    const bool pin = !(no_pin && *no_pin && *no_pin != '0') && n_threads <= topology::physical_cores();
    // The least used cores, not cores 1..n-1 every time: the pools of
    // contexts stepped side by side would otherwise share their first cores
    // and leave the rest idle.
    if (pin) im.cores = topology::claim_cores(n_threads - 1);
    im.threads.reserve(static_cast<size_t>(n_threads - 1));
    try {
        for (int32_t w = 1; w < n_threads; ++w) im.threads.emplace_back([&im, w] { im.worker_main(w); });
    } catch (const std::exception &e) {  // system_error, or bad_alloc for a thread's state
        im.stopping.store(true);
        im.epoch.fetch_add(1);
        im.epoch.notify_all();
        for (auto &t : im.threads) t.join();
        // The process's thread limit or address space, not a bug: out_of_memory (docs/errors.md).
        fail(Status::out_of_memory, "thread pool: cannot start %d threads: %s", n_threads, e.what());
    }
}

ThreadPool::~ThreadPool() {
    Impl &im = *impl_;
    im.stopping.store(true, std::memory_order_release);
    im.epoch.fetch_add(1, std::memory_order_seq_cst);
    im.epoch.notify_all();
    for (auto &t : im.threads) t.join();
}

int32_t ThreadPool::size() const { return impl_->n_threads; }

uint64_t ThreadPool::sleeps() const { return impl_->sleeps.load(std::memory_order_relaxed); }

ThreadPool::StepScope::StepScope(ThreadPool &pool) : pool_(pool) {
    pool_.impl_->open_steps.fetch_add(1, std::memory_order_relaxed);
}

ThreadPool::StepScope::~StepScope() { pool_.impl_->open_steps.fetch_sub(1, std::memory_order_relaxed); }

void ThreadPool::Impl::publish(const TaskRef &fn, int64_t tasks) {
    job = &fn;
    n_tasks = tasks;
    failed.store(false, std::memory_order_relaxed);
    ++generation;
    state.store(generation << kGenShift, std::memory_order_release);
    epoch.store(static_cast<uint32_t>(generation), std::memory_order_seq_cst);
    if (sleepers.load(std::memory_order_seq_cst) > 0) epoch.notify_all();
}

void ThreadPool::Impl::finish() {
    // Every task has been handed out: shut late workers out, wait for the rest.
    uint64_t s = state.fetch_or(kClosed, std::memory_order_acq_rel) | kClosed;
    for (uint32_t i = 1; (s & kActiveMask) != 0; ++i) {
        if (i < 4096) cpu_relax(); else std::this_thread::yield();
        s = state.load(std::memory_order_acquire);
    }
    job = nullptr;
    if (failed.load(std::memory_order_relaxed)) {
        std::exception_ptr e;
        {
            std::lock_guard<std::mutex> lock(error_mutex);
            std::swap(e, error);
        }
        std::rethrow_exception(e);
    }
}

void ThreadPool::parallel_for(int64_t n_tasks, TaskRef fn) {
    if (n_tasks <= 0) return;
    Impl &im = *impl_;
    if (im.n_threads == 1 || n_tasks == 1) {
        for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
        return;
    }
    if (n_tasks > int64_t(UINT32_MAX))
        fail(Status::invalid_argument, "thread pool: %lld tasks in one call", static_cast<long long>(n_tasks));
    // Worker w's slice: tasks [n * w / W, n * (w + 1) / W).
    const uint64_t n = uint64_t(n_tasks), W = uint64_t(im.n_threads);
    for (uint64_t w = 0; w < W; ++w)
        im.ranges[w].packed.store(pack_range(n * w / W, n * (w + 1) / W), std::memory_order_relaxed);
    im.publish(fn, n_tasks);
    im.run_tasks(0);
    im.finish();
}

void ThreadPool::on_each_worker(TaskRef fn) {
    Impl &im = *impl_;
    if (im.n_threads == 1) {
        fn(0, 0);
        return;
    }
    // Task w is worker w's alone, and the call returns only when every
    // worker has run its own (waking the sleeping ones), not when the tasks
    // have been handed out.
    std::atomic<int32_t> done{0};
    auto counted = [&fn, &done](int64_t task, int32_t worker) {
        fn(task, worker);
        done.fetch_add(1, std::memory_order_release);
    };
    const TaskRef job(counted);
    for (int32_t w = 0; w < im.n_threads; ++w)
        im.ranges[size_t(w)].packed.store(pack_range(uint64_t(w), uint64_t(w) + 1), std::memory_order_relaxed);
    struct OwnTasksOnly {  // reset once no worker is in the job, also when a task threw
        Impl &im;
        explicit OwnTasksOnly(Impl &i) : im(i) { im.own_tasks_only = true; }
        ~OwnTasksOnly() { im.own_tasks_only = false; }
    } scope(im);
    im.publish(job, im.n_threads);
    im.run_tasks(0);
    while (done.load(std::memory_order_acquire) < im.n_threads && !im.failed.load(std::memory_order_relaxed))
        std::this_thread::yield();
    im.finish();
}

}  // namespace moe
