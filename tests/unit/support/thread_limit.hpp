// Makes starting threads fail after a few, as a cgroup's pids limit or a
// full address space does. For a child process only: it cannot be undone.
#pragma once

#include <pthread.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstring>

#include "common/error.hpp"
#include "support/scoped_env.hpp"

namespace moe::test {

// Leaves room in the address space for about `n` more threads (of 1 MiB
// stacks); false when the limit cannot be set (or a sanitizer owns memory).
inline bool allow_only_a_few_more_threads(int n) {
#ifdef MOESTREAM_TEST_SANITIZED
    (void)n;
    return false;
#else
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) return false;
    const bool stack_set = pthread_attr_setstacksize(&attr, size_t{1} << 20) == 0 && pthread_setattr_default_np(&attr) == 0;
    pthread_attr_destroy(&attr);
    if (!stack_set) return false;
    unsigned long long vm_kb = 0;
    if (FILE *f = std::fopen("/proc/self/status", "r")) {
        char line[256];
        while (std::fgets(line, sizeof line, f))
            if (std::strncmp(line, "VmSize:", 7) == 0) vm_kb = std::strtoull(line + 7, nullptr, 10);
        std::fclose(f);
    }
    if (vm_kb == 0) return false;
    const rlim_t limit = rlim_t(vm_kb) * 1024 + rlim_t(n) * ((1u << 20) + (64u << 10)) + (256u << 10);
    const rlimit lim{limit, limit};
    return setrlimit(RLIMIT_AS, &lim) == 0;
#endif
}

// Whether allow_only_a_few_more_threads can work in this build: not under a
// sanitizer, whose shadow memory owns the address space.
constexpr bool thread_limits_work() {
#ifdef MOESTREAM_TEST_SANITIZED
    return false;
#else
    return true;
#endif
}

// For a child process: calls start() with room for only two more threads and
// returns an exit code, 0 when it failed with out_of_memory (a resource the
// process lacks, not a library bug), 1 when every thread started (the limit
// did not bite), 2 for another status, 3 for another exception, 100 when the
// limit could not be set.
template <class Start>
int exit_code_when_threads_cannot_start(Start start) {
    if (!allow_only_a_few_more_threads(2)) return 100;
    try {
        start();
        return 1;
    } catch (const moe::Error &e) {
        return e.status() == moe::Status::out_of_memory ? 0 : 2;
    } catch (...) {
        return 3;
    }
}

}  // namespace moe::test
