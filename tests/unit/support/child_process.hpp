// Tests that run the code under test in a forked child (resource limits,
// signals, alarms that must not reach the test runner).
#pragma once

#include <sys/types.h>
#include <sys/wait.h>

namespace moe::test {

// Waits for the child; its exit code, or -1 when a signal ended it (-2 when
// it cannot be waited for).
inline int wait_exit_code(pid_t pid) {
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return -2;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace moe::test
