// The probes of 'moestream bench' start threads of their own. Starting one
// can fail (std::system_error: a cgroup's pids limit, no address space left
// for its stack); a probe then runs with the threads it has instead of
// ending in std::terminate.
#pragma once

#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace cli {

// Starts up to `n` threads running fn(first), fn(first + 1), ..., and stops
// at the first the system refuses, with the reason in `why`. The threads are
// joined when the vector goes.
template <class Fn>
std::vector<std::jthread> start_threads(int n, int first, const Fn &fn, std::string &why) {
    std::vector<std::jthread> threads;
    threads.reserve(size_t(n > 0 ? n : 0));  // no reallocation once threads run
    for (int i = 0; i < n; ++i) {
        try {
            threads.emplace_back(fn, first + i);
        } catch (const std::system_error &e) {
            why = "cannot start thread " + std::to_string(first + i) + ": " + e.what();
            break;
        }
    }
    return threads;
}

}  // namespace cli
