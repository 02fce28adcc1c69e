// Persistent compute threads. The calling thread takes part as worker 0, so
// a pool of n threads starts n - 1 OS threads. Workers are pinned to physical
// cores (hwloc) when the machine allows it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

namespace moe {

class ThreadPool {
public:
    explicit ThreadPool(int32_t n_threads);  // 0 = one per physical core
    ~ThreadPool();
    ThreadPool(const ThreadPool &) = delete;
    ThreadPool &operator=(const ThreadPool &) = delete;

    int32_t size() const;
    // Runs fn(task, worker) for task in [0, n_tasks) across the workers and
    // returns when all are done. Tasks are handed out dynamically. Not
    // reentrant: fn must not call parallel_for. No allocation per call.
    void parallel_for(int64_t n_tasks, const std::function<void(int64_t task, int32_t worker)> &fn);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace moe
