// Persistent compute threads. The calling thread takes part as worker 0, so
// a pool of n threads starts n - 1 OS threads. Workers are pinned to physical
// cores (hwloc) when the machine allows it (MOESTREAM_NO_PIN=1 disables), to
// the cores the process's live pools have pinned the fewest threads to.
//
// Idle workers spin for a short while before sleeping, because the engine
// issues thousands of short parallel_for calls per token and a futex wakeup
// per call would dominate them. MOESTREAM_SPIN_US overrides the spin time
// (default 200 us; 0 when the pool has more threads than the process has CPUs).
// MOESTREAM_STEP_SPIN_US (default 0 = off) lets them spin longer while a
// step is open (StepScope): a streamed layer waits for reads between groups
// of experts, often for longer than the short spin, and a worker woken from
// sleep (hundreds of microseconds on virtual machines) arrives after the
// group it was woken for has been computed by the caller alone. It is off by
// default because the spinning CPU is taken from the kernel's I/O and reclaim
// work, which cost more than the wake-ups on small machines (measured in
// docs/performance.md). A pool that never spins does not spin in steps either.
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

namespace moe {

// Non-owning reference to a callable fn(int64_t task, int32_t worker); lets
// parallel_for take any lambda without allocating. The callable must outlive
// the call (always true for a temporary passed to parallel_for).
class TaskRef {
public:
    template <typename F>
        requires(!std::is_same_v<std::remove_cvref_t<F>, TaskRef> &&
                 std::is_invocable_v<F &, int64_t, int32_t>)
    TaskRef(F &&fn) noexcept  // NOLINT: implicit by design
        : obj_(const_cast<void *>(static_cast<const void *>(std::addressof(fn)))),
          call_(&invoke<std::remove_reference_t<F>>) {}

    void operator()(int64_t task, int32_t worker) const { call_(obj_, task, worker); }

private:
    template <typename F>
    static void invoke(void *obj, int64_t task, int32_t worker) {
        (*static_cast<F *>(obj))(task, worker);
    }
    void *obj_;
    void (*call_)(void *, int64_t, int32_t);
};

class ThreadPool {
public:
    explicit ThreadPool(int32_t n_threads);  // 0 = one per physical core
    ~ThreadPool();
    ThreadPool(const ThreadPool &) = delete;
    ThreadPool &operator=(const ThreadPool &) = delete;

    int32_t size() const;

    // How many times idle workers have stopped spinning and gone to sleep.
    uint64_t sleeps() const;

    // Marks one step (a forward pass over a batch of tokens): between its
    // parallel_for calls idle workers spin for the step spin time
    // (MOESTREAM_STEP_SPIN_US; by default the short spin). Scopes may nest;
    // the step lasts until the outermost closes.
    class StepScope {
    public:
        explicit StepScope(ThreadPool &pool);
        ~StepScope();
        StepScope(const StepScope &) = delete;
        StepScope &operator=(const StepScope &) = delete;

    private:
        ThreadPool &pool_;
    };
    // Runs fn(task, worker) for task in [0, n_tasks) across the workers and
    // returns when all are done. Each worker runs a contiguous slice of the
    // tasks in increasing order and then takes over the back half of the
    // largest slice left (so neighbouring tasks, e.g. neighbouring rows, tend
    // to run on one thread one after the other). Not
    // reentrant: fn must not call parallel_for. No allocation per call.
    // If a task throws, no further tasks are started and the first exception
    // is rethrown here once the running tasks have finished.
    void parallel_for(int64_t n_tasks, TaskRef fn);

    // Runs fn(w, w) once on every worker w (the caller is worker 0) and
    // returns when all have: sets up per-thread state before a hot path
    // (e.g. the kernels' scratch). Not reentrant, like parallel_for.
    void on_each_worker(TaskRef fn);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace moe
