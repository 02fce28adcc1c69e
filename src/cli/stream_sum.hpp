// The streaming read both memory-bandwidth probes time ('moestream bench
// --membw' and bench/bench_membw): sum a run of 64-bit words, so every byte
// is loaded once and the loop is bound by memory, not by arithmetic.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cli {

constexpr size_t kPrefetchWords = 8192 / 8;

// Plain summing loops; the compiler vectorises them for the target below.
// `n` is a multiple of 8 words.
__attribute__((target("avx2"))) inline uint64_t stream_sum_avx2(const uint64_t *p, size_t n) {
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i < n; i += 8) {
        // The weight kernels prefetch 8 KiB ahead with the NTA hint; the
        // probe reads the same way, or it would measure less than they reach.
        __builtin_prefetch(p + i + kPrefetchWords, 0, 0);
        s0 += p[i] + p[i + 4];
        s1 += p[i + 1] + p[i + 5];
        s2 += p[i + 2] + p[i + 6];
        s3 += p[i + 3] + p[i + 7];
    }
    return s0 ^ s1 ^ s2 ^ s3;
}

inline uint64_t stream_sum_baseline(const uint64_t *p, size_t n) {
    uint64_t s0 = 0, s1 = 0;
    for (size_t i = 0; i < n; i += 2) {
        s0 += p[i];
        s1 += p[i + 1];
    }
    return s0 ^ s1;
}

// `avx2`: __builtin_cpu_supports("avx2"), asked once by the caller.
inline uint64_t stream_sum(const uint64_t *p, size_t n, bool avx2) {
    return avx2 ? stream_sum_avx2(p, n) : stream_sum_baseline(p, n);
}

}  // namespace cli
