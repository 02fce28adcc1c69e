// Memory-bandwidth probe for 'moestream bench --membw': the method of
// bench/bench_membw (sum a buffer far larger than the last-level cache), run
// in-process so a resident benchmark can state its roofline against the
// bandwidth measured in the same run.
#pragma once

#include <cstdint>
#include <string>

namespace cli {

struct MembwResult {
    double bytes_per_s = 0;  // best pass
    double median_bytes_per_s = 0;
    uint64_t buffer_bytes = 0;
    int32_t threads = 0;
    int32_t passes = 0;
};

// Streams through `buffer_bytes` with `threads` threads (each its own slice)
// repeatedly for about `seconds`. Returns false with `why` if the buffer
// cannot be allocated. Threads the system refuses to start are left out
// (out.threads and out.buffer_bytes say what ran), with the reason in `why`.
bool measure_memory_bandwidth(uint64_t buffer_bytes, int32_t threads, double seconds, MembwResult &out,
                              std::string &why);

}  // namespace cli
