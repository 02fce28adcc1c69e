#include "bench_core.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <vector>

#include "cgroup_limit.hpp"
#include "cli_util.hpp"
#include "device_counters.hpp"
#include "model_options.hpp"
#include "os_handles.hpp"
#include "start_threads.hpp"

namespace cli {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

uint64_t peak_rss_bytes() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
    return 0;
}

double process_cpu_seconds() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    auto secs = [](const timeval &t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; };
    return secs(u.ru_utime) + secs(u.ru_stime);
}

// Bytes this process caused to be read from storage (page-cache misses,
// readahead and direct reads alike).
uint64_t process_read_bytes() {
    std::ifstream f("/proc/self/io");
    std::string key;
    uint64_t value = 0;
    while (f >> key >> value)
        if (key == "read_bytes:") return value;
    return 0;
}

// The failed call as every command reports one, after the stage of the run it ended ("prompt: ...").
void set_error(BenchResult &r, const char *call, int status, const char *stage = nullptr) {
    std::snprintf(r.error, sizeof r.error, "%s%s%s", stage ? stage : "", stage ? ": " : "",
                  library_error(call, status).c_str());
}

// Replays the decode's logged reads at the engine's queue depth, at four
// times that, and at the mean depth the engine kept while busy; the run
// itself stays ok when the replay fails.
void replay_decode_reads(moestream_context *ctx, BenchResult &r) {
    moestream_read_replay engine, deep, mean;
    moestream_read_replay_init(&engine);
    moestream_read_replay_init(&deep);
    moestream_read_replay_init(&mean);
    int st = moestream_read_log_replay(ctx, &engine);
    if (st == MOESTREAM_OK) {
        deep.queue_depth = std::max(64, 4 * engine.engine_queue_depth);
        st = moestream_read_log_replay(ctx, &deep);
    }
    if (st == MOESTREAM_OK) {
        mean.queue_depth = std::clamp(int32_t(r.mean_in_flight() + 0.5), 1, std::max(1, engine.engine_queue_depth));
        st = moestream_read_log_replay(ctx, &mean);
    }
    if (st != MOESTREAM_OK) {
        std::snprintf(r.replay_note, sizeof r.replay_note, "replay failed: %s",
                      library_error("moestream_read_log_replay", st).c_str());
        return;
    }
    r.replay_ok = engine.reads > 0;
    r.replay_reads = engine.reads;
    r.replay_dropped = engine.dropped;
    r.replay_bytes = engine.bytes;
    r.replay_buffered = engine.buffered_reads;
    r.replay_depth = engine.queue_depth;
    r.replay_deep_depth = deep.queue_depth;
    r.replay_ns = engine.elapsed_ns;
    r.replay_deep_ns = deep.elapsed_ns;
    r.replay_mean_depth = mean.queue_depth;
    r.replay_mean_ns = mean.elapsed_ns;
    std::snprintf(r.replay_backend, sizeof r.replay_backend, "%s", engine.backend);
    if (!r.replay_ok)
        std::snprintf(r.replay_note, sizeof r.replay_note, "the decode read nothing from the device");
    else if (engine.dropped > 0)
        std::snprintf(r.replay_note, sizeof r.replay_note, "the log held %llu of %llu reads",
                      (unsigned long long)engine.reads, (unsigned long long)(engine.reads + engine.dropped));
    else if (engine.buffered_reads > 0)
        std::snprintf(r.replay_note, sizeof r.replay_note, "%llu of %llu reads buffered (O_DIRECT refused)",
                      (unsigned long long)engine.buffered_reads, (unsigned long long)engine.reads);
}

// The measurement itself, in the child.
void measure(const BenchConfig &c, BenchResult &r) {
    moestream_params p;
    moestream_params_init(&p);
    p.model_path = c.model.c_str();
    p.packed_path = c.packed_path.empty() ? nullptr : c.packed_path.c_str();
    p.memory_budget = c.budget;
    p.io_mode = c.io_mode;
    p.prefetch = c.prefetch;
    p.lookahead_layers = c.lookahead_layers;
    p.max_batch = c.max_batch;
    p.numa_placement = c.numa_placement;
    p.cache_policy = c.cache_policy;
    p.n_threads = c.n_threads;
    p.profile_path = c.profile_path.c_str();  // "" = off
    log_library_messages(p);
    const auto t_open = Clock::now();
    moestream_context *ctx = nullptr;
    int st = moestream_open(&p, &ctx);
    if (st != MOESTREAM_OK) return set_error(r, "moestream_open", st);
    std::unique_ptr<moestream_context, void (*)(moestream_context *)> guard(ctx, moestream_close);
    r.open_s = since(t_open);
    const int32_t n_vocab = moestream_n_vocab(ctx);
    std::vector<float> logits(static_cast<size_t>(n_vocab));
    std::mt19937_64 rng(c.seed);
    std::vector<int32_t> prompt(static_cast<size_t>(std::max(1, c.prompt)));
    for (int32_t &t : prompt) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(std::min(n_vocab, 256 + 676)));

    if (c.resident) {
        // Untimed: faults the mapping in; the timed run then starts from position 0 again.
        const auto t_warm = Clock::now();
        st = moestream_step(ctx, prompt.data(), static_cast<int32_t>(prompt.size()), logits.data());
        if (st != MOESTREAM_OK) return set_error(r, "moestream_step", st, "warm-up");
        st = moestream_reset(ctx);
        if (st != MOESTREAM_OK) return set_error(r, "moestream_reset", st, "warm-up");
        r.warmup_s = since(t_warm);
    }
    const auto t_prefill = Clock::now();
    st = moestream_step(ctx, prompt.data(), static_cast<int32_t>(prompt.size()), logits.data());
    if (st != MOESTREAM_OK) return set_error(r, "moestream_step", st, "prompt");
    r.prefill_s = since(t_prefill);
    r.ttft_s = r.prefill_s;  // the first generated token is known once the prompt's logits are
    r.prompt_tokens = static_cast<int32_t>(prompt.size());

    moestream_stats s0, s1;
    moestream_stats_init(&s0);
    moestream_stats_init(&s1);
    // The steps the context has room for, whatever -n asked.
    const int32_t limit = std::min(c.n_tokens, moestream_n_ctx(ctx) - r.prompt_tokens);
    bool logging = false;
    if (c.read_log_per_step > 0) {
        // Sized by the steps that can run, not by -n: the log is reserved up
        // front. 2^28 entries is the library's bound; reads past it count as dropped.
        const uint64_t capacity =
            std::min<uint64_t>(std::max<uint64_t>(uint64_t(std::max(limit, 0) + 1) * c.read_log_per_step, 1u << 16),
                               uint64_t(1) << 28);
        st = moestream_read_log_start(ctx, capacity);
        logging = st == MOESTREAM_OK;
        if (!logging)
            std::snprintf(r.replay_note, sizeof r.replay_note, "no read log: %s",
                          library_error("moestream_read_log_start", st).c_str());
    }
    moestream_stats_get(ctx, &s0);
    const std::string device_stat = device_stat_path(c.model);
    const DeviceCounters dev0 = read_device_counters(device_stat);
    const uint64_t io0 = process_read_bytes();
    const double cpu0 = process_cpu_seconds();
    const bool tty = ::isatty(2);
    const auto t_decode = Clock::now();
    const uint64_t feed_vocab = static_cast<uint64_t>(std::min(n_vocab, 256 + 676));
    for (int32_t i = 0; i < limit; ++i) {
        const int32_t next = c.random_feed ? static_cast<int32_t>(rng() % feed_vocab) : greedy_token(logits);
        if (next < 0) {
            std::snprintf(r.error, sizeof r.error, "decode: %s", kNoGreedyToken);
            return;
        }
        st = moestream_step(ctx, &next, 1, logits.data());
        if (st != MOESTREAM_OK) return set_error(r, "moestream_step", st, "decode");
        ++r.decode_tokens;
        const double elapsed = since(t_decode);
        if (c.live && (tty || r.decode_tokens % 8 == 0 || r.decode_tokens == limit)) {
            moestream_stats_get(ctx, &s1);
            const uint64_t hits = s1.cache_hits - s0.cache_hits, misses = s1.cache_misses - s0.cache_misses;
            const uint64_t bytes = std::max(s1.bytes_read_demand + s1.bytes_read_prefetch - s0.bytes_read_demand -
                                                s0.bytes_read_prefetch,
                                            process_read_bytes() - io0);
            char hit[32] = "  -";
            if (s1.io_mode != MOESTREAM_IO_MMAP && hits + misses)
                std::snprintf(hit, sizeof hit, "%5.1f%%", 100.0 * double(hits) / double(hits + misses));
            std::fprintf(stderr, "%s  token %3d/%d  %6.2f tok/s  hit rate %s  read %s   %s", tty ? "\r" : "",
                         r.decode_tokens, limit, r.decode_tokens / elapsed, hit, format_bytes(bytes).c_str(),
                         tty ? "" : "\n");
        }
        if (c.max_seconds > 0 && elapsed > c.max_seconds) break;
    }
    r.decode_s = since(t_decode);
    if (const DeviceCounters dev1 = read_device_counters(device_stat); dev0.ok && dev1.ok) {
        r.device_counted = true;
        r.kernel_busy_ms = dev1.io_ticks_ms - dev0.io_ticks_ms;
        r.kernel_bytes_read = (dev1.sectors_read - dev0.sectors_read) * 512;
    }
    r.decode_cpu_s = process_cpu_seconds() - cpu0;
    if (c.live && tty) std::fprintf(stderr, "\n");
    moestream_stats_get(ctx, &s1);
    r.engine_bytes_read = s1.bytes_read_demand + s1.bytes_read_prefetch - s0.bytes_read_demand - s0.bytes_read_prefetch;
    r.device_bytes_read = process_read_bytes() - io0;
    // mmap reads happen in page faults the engine does not see: count what the kernel read for us.
    r.decode_bytes_read = std::max(r.engine_bytes_read, r.device_bytes_read);
    r.decode_hits = s1.cache_hits - s0.cache_hits;
    r.decode_misses = s1.cache_misses - s0.cache_misses;
    if (!c.touched_expert_bytes.empty()) {
        // Every expert request of a layer (hit or miss) is one expert whose weights the step reads.
        r.decode_touched_bytes = c.touched_dense * uint64_t(r.decode_tokens);
        for (int32_t l = 0; l < s1.n_layer && size_t(l) < c.touched_expert_bytes.size(); ++l)
            r.decode_touched_bytes += (s1.layer_hits[l] + s1.layer_misses[l] - s0.layer_hits[l] - s0.layer_misses[l]) *
                                      c.touched_expert_bytes[size_t(l)];
    }
    r.decode_io_wait_ns = s1.io_wait_ns - s0.io_wait_ns;
    r.decode_step_ns = s1.step_ns - s0.step_ns;
    r.decode_bytes_demand = s1.bytes_read_demand - s0.bytes_read_demand;
    r.decode_bytes_prefetch = s1.bytes_read_prefetch - s0.bytes_read_prefetch;
    r.decode_bytes_wasted = s1.bytes_read_wasted - s0.bytes_read_wasted;
    r.decode_prefetch_issued = s1.prefetch_issued - s0.prefetch_issued;
    r.decode_prefetch_useful = s1.prefetch_useful - s0.prefetch_useful;
    r.decode_compute_ns = s1.compute_ns - s0.compute_ns;
    r.decode_attention_ns = s1.attention_ns - s0.attention_ns;
    r.decode_moe_ns = s1.moe_ns - s0.moe_ns;
    r.decode_evictions = s1.evictions - s0.evictions;
    r.resident_bytes = s1.resident_bytes;
    r.n_layer = std::clamp<int32_t>(s1.n_layer, 0, MOESTREAM_MAX_LAYERS);
    for (int32_t l = 0; l < r.n_layer; ++l) {
        r.layer_hits[l] = s1.layer_hits[l] - s0.layer_hits[l];
        r.layer_misses[l] = s1.layer_misses[l] - s0.layer_misses[l];
    }
    r.total_bytes_read = s1.bytes_read_demand + s1.bytes_read_prefetch;
    r.expert_cache_bytes = s1.expert_cache_bytes;
    r.io_mode = s1.io_mode;
    std::snprintf(r.io_mode_reason, sizeof r.io_mode_reason, "%s", moestream_io_mode_reason(ctx));
    r.decode_io_busy_ns = s1.io_busy_ns - s0.io_busy_ns;
    r.decode_io_bytes = s1.io_bytes_completed - s0.io_bytes_completed;
    r.decode_io_read_ns = s1.io_read_ns - s0.io_read_ns;
    r.io_queue_depth = s1.io_queue_depth;
    r.peak_rss = peak_rss_bytes();
    r.ok = true;
    if (logging) replay_decode_reads(ctx, r);
}

bool read_all(int fd, void *data, size_t size) {
    auto *p = static_cast<uint8_t *>(data);
    while (size > 0) {
        const ssize_t n = ::read(fd, p, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        size -= size_t(n);
    }
    return true;
}

}  // namespace

uint64_t cgroup_limit_for(uint64_t budget) { return budget + std::max<uint64_t>(budget / 20, 64ull << 20); }

bool drop_page_cache(const std::string &path) {
    const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return false;
    ::fdatasync(fd.get());  // dirty pages (a freshly generated model) cannot be dropped
    return ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED) == 0;
}

BenchResult run_bench(const BenchConfig &c) {
    BenchResult result;
    std::unique_ptr<MemoryCgroup> cgroup;
    std::string why;
    if (c.cgroup) {
        if (c.budget == 0) why = "no budget to hold the run to";
        else cgroup = MemoryCgroup::create(cgroup_limit_for(c.budget), why);
    }
    if (c.cold && !c.resident)
        for (const std::string &file : model_files(c.model, c.packed_path)) drop_page_cache(file);
    int fds[2];
    if (::pipe(fds) != 0) {
        std::snprintf(result.error, sizeof result.error, "pipe: %s", std::strerror(errno));
        return result;
    }
    UniqueFd from_child(fds[0]), to_parent(fds[1]);
    flush_stdout();
    std::fflush(stderr);
    const pid_t pid = ::fork();
    if (pid < 0) {
        std::snprintf(result.error, sizeof result.error, "fork: %s", std::strerror(errno));
        return result;
    }
    if (pid == 0) {
        // The child ends in _exit (no destructors): it closes its ends itself.
        from_child.reset();
        BenchResult r;
        std::string add_why;
        if (cgroup && cgroup->add(0, add_why)) {
            r.cgroup_used = true;
            std::snprintf(r.cgroup_note, sizeof r.cgroup_note, "held to %s by cgroup %s",
                          format_bytes(cgroup_limit_for(c.budget)).c_str(), cgroup->version());
        } else {
            std::snprintf(r.cgroup_note, sizeof r.cgroup_note, "unconstrained%s%s", c.cgroup ? ": " : "",
                          c.cgroup ? (cgroup ? add_why.c_str() : why.c_str()) : "");
        }
        measure(c, r);
        (void)write_all(to_parent.get(), &r, sizeof r);  // a short result is the parent's error to report
        to_parent.reset();
        std::fflush(stderr);
        ::_exit(0);
    }
    to_parent.reset();  // so the read ends when the child exits
    const bool got = read_all(from_child.get(), &result, sizeof result);
    from_child.reset();
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!got) {
        result = BenchResult{};
        if (WIFSIGNALED(status))
            std::snprintf(result.error, sizeof result.error, "run killed by signal %d%s", WTERMSIG(status),
                          cgroup && WTERMSIG(status) == SIGKILL ? " (out of memory in the cgroup)" : "");
        else
            std::snprintf(result.error, sizeof result.error, "run exited with status %d", WEXITSTATUS(status));
    }
    if (cgroup) result.cgroup_peak = cgroup->peak_bytes();
    return result;
}

double measure_disk_bandwidth(const std::string &path, uint64_t request_bytes, int &depth, double seconds,
                              std::string &why) {
    constexpr uint64_t kAlign = 4096;
    const UniqueFd file(::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC));
    if (!file) {
        why = path + ": O_DIRECT open failed: " + std::strerror(errno);
        return 0;
    }
    const int fd = file.get();
    const off_t size = ::lseek(fd, 0, SEEK_END);
    request_bytes = std::max<uint64_t>(kAlign, (request_bytes + kAlign - 1) / kAlign * kAlign);
    if (size < static_cast<off_t>(request_bytes * 2)) {
        why = path + ": file too small to measure";
        return 0;
    }
    std::atomic<uint64_t> bytes{0};
    std::atomic<bool> failed{false};
    const auto start = Clock::now();
    auto worker = [&](int id) {
        void *buf = nullptr;
        if (::posix_memalign(&buf, kAlign, request_bytes) != 0) return failed.store(true);
        std::mt19937_64 rng(1234 + id);
        const uint64_t slots = (static_cast<uint64_t>(size) - request_bytes) / kAlign;
        while (since(start) < seconds) {
            const off_t off = static_cast<off_t>((rng() % slots) * kAlign);
            const ssize_t n = ::pread(fd, buf, request_bytes, off);
            if (n <= 0) {
                failed.store(true);
                break;
            }
            bytes += static_cast<uint64_t>(n);
        }
        std::free(buf);
    };
    std::string refused;
    {
        const std::vector<std::jthread> readers = start_threads(std::max(1, depth), 0, worker, refused);
        depth = int(readers.size());
    }  // joins them
    if (depth == 0) {
        why = path + ": " + refused;
        return 0;
    }
    if (!refused.empty()) why = refused;  // fewer readers than asked for
    const double elapsed = since(start);
    if (failed.load() && bytes.load() == 0) {
        why = path + ": O_DIRECT reads failed";
        return 0;
    }
    return elapsed > 0 ? double(bytes.load()) / elapsed : 0;
}

namespace {

bool read_through(const std::string &path) {
    const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return false;
    ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
    std::vector<uint8_t> buf(size_t{8} << 20);
    for (;;) {
        const ssize_t n = ::read(fd.get(), buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n == 0;
    }
}

// Reads the file in through a mapping that asks for huge pages, so the page
// cache holds it in 2 MiB folios that the engine's own mapping then maps with
// one page-table entry each. False if huge pages cannot be asked for.
bool read_through_huge_mapping(const std::string &path) {
#if defined(MADV_HUGEPAGE)
    const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return false;
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || st.st_size <= 0) return false;
    const size_t size = size_t(st.st_size);
    const UniqueMapping map(::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.get(), 0), size);
    if (!map || ::madvise(map.data(), size, MADV_HUGEPAGE) != 0) return false;
#ifdef MADV_POPULATE_READ
    if (::madvise(map.data(), size, MADV_POPULATE_READ) == 0) return true;
#endif
    volatile uint8_t sink = 0;
    const auto *b = static_cast<const uint8_t *>(map.data());
    for (size_t off = 0; off < size; off += 4096) sink = sink + b[off];
    return true;
#else
    (void)path;
    return false;
#endif
}

}  // namespace

bool load_into_page_cache(const std::string &path) {
    // Cached pages keep their folio size: drop the file's pages first so that
    // they come back huge (pages other processes have mapped stay as they are).
    drop_page_cache(path);
    return read_through_huge_mapping(path) || read_through(path);
}

std::string bench_result_json(const BenchConfig &c, const BenchResult &r, double membw) {
    char buf[3072];
    std::snprintf(
        buf, sizeof buf,
        "{\"ok\": %s, \"error\": %s, \"io_mode_requested\": \"%s\", \"io_mode\": \"%s\", \"io_mode_reason\": %s, "
        "\"budget_bytes\": %llu, \"prefetch\": %d, \"cache_policy\": \"%s\", \"max_batch\": %d, \"prompt_tokens\": %d, "
        "\"decode_tokens\": %d, \"open_s\": %.4f, \"prefill_s\": %.4f, \"prefill_tok_s\": %.4f, \"ttft_s\": %.4f, "
        "\"decode_s\": %.6g, \"decode_tok_s\": %.6g, \"bytes_read_per_token\": %.1f, \"read_bw_bytes_s\": %.1f, "
        "\"engine_bytes_read\": %llu, \"device_bytes_read\": %llu, \"hit_rate\": %.6f, \"io_wait_share\": %.6f, \"expert_cache_bytes\": %llu, \"peak_rss_bytes\": %llu, "
        "\"cold\": %s, \"cgroup\": %s, \"cgroup_note\": %s, \"cgroup_peak_bytes\": %llu, \"feed\": \"%s\", "
        "\"demand_bytes_per_token\": %.1f, \"prefetch_bytes_per_token\": %.1f, \"wasted_bytes_per_token\": %.1f, "
        "\"prefetch_issued\": %llu, \"prefetch_useful\": %llu, \"decode_cpu_s\": %.4f}",
        r.ok ? "true" : "false", json_string(r.error).c_str(), moestream_io_mode_name(c.io_mode),
        r.ok ? moestream_io_mode_name(r.io_mode) : "", json_string(r.io_mode_reason).c_str(),
        static_cast<unsigned long long>(c.budget), c.prefetch, moestream_cache_policy_name(c.cache_policy),
        c.max_batch, r.prompt_tokens, r.decode_tokens, r.open_s, r.prefill_s, r.prefill_tok_s(), r.ttft_s, r.decode_s,
        r.decode_tok_s(), r.bytes_per_token(), r.read_bw(), static_cast<unsigned long long>(r.engine_bytes_read),
        static_cast<unsigned long long>(r.device_bytes_read), r.hit_rate(), r.io_wait_share(),
        static_cast<unsigned long long>(r.expert_cache_bytes), static_cast<unsigned long long>(r.peak_rss),
        c.cold ? "true" : "false", r.cgroup_used ? "true" : "false", json_string(r.cgroup_note).c_str(),
        static_cast<unsigned long long>(r.cgroup_peak), c.random_feed ? "random" : "greedy",
        r.per_token(r.decode_bytes_demand), r.per_token(r.decode_bytes_prefetch), r.per_token(r.decode_bytes_wasted),
        static_cast<unsigned long long>(r.decode_prefetch_issued),
        static_cast<unsigned long long>(r.decode_prefetch_useful), r.decode_cpu_s);
    std::string j = buf;
    j.pop_back();
    std::snprintf(buf, sizeof buf,
                  ", \"decode_compute_s\": %.6f, \"decode_attention_s\": %.6f, \"decode_moe_s\": %.6f, "
                  "\"decode_evictions\": %llu, \"resident_bytes\": %llu",
                  double(r.decode_compute_ns) * 1e-9, double(r.decode_attention_ns) * 1e-9,
                  double(r.decode_moe_ns) * 1e-9, static_cast<unsigned long long>(r.decode_evictions),
                  static_cast<unsigned long long>(r.resident_bytes));
    j += buf;
    for (const auto &[name, counts] : {std::pair{"layer_hits", r.layer_hits}, std::pair{"layer_misses", r.layer_misses}}) {
        j += std::string(", \"") + name + "\": [";
        for (int32_t l = 0; l < r.n_layer; ++l) j += (l ? ", " : "") + std::to_string(counts[l]);
        j += "]";
    }
    std::snprintf(buf, sizeof buf,
                  ", \"io_busy_s\": %.6f, \"io_busy_share\": %.6f, \"io_busy_bw_bytes_s\": %.1f, "
                  "\"io_mean_in_flight\": %.3f, \"io_queue_depth\": %d, \"replay\": {\"ok\": %s, \"note\": %s, \"backend\": \"%s\", "
                  "\"reads\": %llu, \"dropped\": %llu, \"bytes\": %llu, \"buffered_reads\": %llu, "
                  "\"depth\": %d, \"bw_bytes_s\": %.1f, \"deep_depth\": %d, \"deep_bw_bytes_s\": %.1f, "
                  "\"mean_depth\": %d, \"mean_depth_bw_bytes_s\": %.1f}, "
                  "\"kernel_device\": {\"ok\": %s, \"busy_s\": %.3f, \"busy_share\": %.6f, \"bytes_read\": %llu, "
                  "\"bw_while_busy_bytes_s\": %.1f}}",
                  double(r.decode_io_busy_ns) * 1e-9, r.io_busy_share(), r.busy_bw(), r.mean_in_flight(), r.io_queue_depth,
                  r.replay_ok ? "true" : "false", json_string(r.replay_note).c_str(), r.replay_backend,
                  static_cast<unsigned long long>(r.replay_reads), static_cast<unsigned long long>(r.replay_dropped),
                  static_cast<unsigned long long>(r.replay_bytes), static_cast<unsigned long long>(r.replay_buffered),
                  r.replay_depth, r.replay_bw(), r.replay_deep_depth, r.replay_deep_bw(), r.replay_mean_depth,
                  r.replay_mean_bw(), r.device_counted ? "true" : "false", double(r.kernel_busy_ms) * 1e-3,
                  r.device_busy_share(), static_cast<unsigned long long>(r.kernel_bytes_read), r.device_busy_bw());
    j += buf;
    if (c.resident || r.decode_touched_bytes > 0) {
        j.pop_back();
        const double roofline = membw > 0 && r.touched_per_token() > 0 ? membw / r.touched_per_token() : 0;
        std::snprintf(buf, sizeof buf,
                      ", \"resident\": %s, \"warmup_s\": %.4f, \"bytes_touched_per_token\": %.1f, "
                      "\"touched_bw_bytes_s\": %.1f, \"membw_bytes_s\": %.1f, \"roofline_tok_s\": %.6g, "
                      "\"roofline_ratio\": %.6g}",
                      c.resident ? "true" : "false", r.warmup_s, r.touched_per_token(), r.touched_bw(), membw,
                      roofline, roofline > 0 ? r.decode_tok_s() / roofline : 0.0);
        j += buf;
    }
    return j;
}

}  // namespace cli
