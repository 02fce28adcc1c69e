// Test helpers about the process the tests run in: an environment variable
// set for one scope, and whether a sanitizer runtime is linked in.
#pragma once

#include <cstdlib>
#include <string>

// Sanitizer runtimes own malloc and map shadow memory, so allocation counts
// and resident-set sizes say nothing about the engine under them.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MOESTREAM_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MOESTREAM_TEST_SANITIZED 1
#endif
#endif

namespace moe::test {

// Sets an environment variable until the end of the scope.
struct ScopedEnv {
    std::string name;
    ScopedEnv(const char *n, const std::string &value) : name(n) { ::setenv(n, value.c_str(), 1); }
    ~ScopedEnv() { ::unsetenv(name.c_str()); }
    ScopedEnv(const ScopedEnv &) = delete;
    ScopedEnv &operator=(const ScopedEnv &) = delete;
};

}  // namespace moe::test
