#include "experts/io_mode_choice.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "common/cgroup_memory.hpp"
#include "common/error.hpp"
#include "common/saturating.hpp"
#include "model/hparams.hpp"
#include "model/kv_cache.hpp"

namespace moe {

const char *io_mode_name(int32_t mode) {
    switch (mode) {
    case MOESTREAM_IO_AUTO: return "auto";
    case MOESTREAM_IO_MMAP: return "mmap";
    case MOESTREAM_IO_DIRECT: return "direct";
    case MOESTREAM_IO_PREAD: return "pread";
    default: return nullptr;
    }
}

std::optional<moestream_io_mode> parse_io_mode(std::string_view name) {
    for (int32_t m = MOESTREAM_IO_AUTO; m <= MOESTREAM_IO_PREAD; ++m)
        if (name == io_mode_name(m)) return static_cast<moestream_io_mode>(m);
    return std::nullopt;
}

std::string human_bytes(uint64_t bytes) {
    static const char *const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) return format("%llu B", static_cast<unsigned long long>(bytes));
    double v = static_cast<double>(bytes) / 1024.0;
    size_t unit = 0;
    while (v >= 1024.0 && unit + 1 < std::size(kUnits)) {
        v /= 1024.0;
        ++unit;
    }
    return format("%.1f %s", v, kUnits[unit]);
}

uint64_t automatic_memory_budget() { return process_available_memory() / 10 * 8; }

// Saturating arithmetic: absurd hyper-parameters give a huge estimate, never a wrapped one.
uint64_t estimate_runtime_overhead(const HParams &hp, int32_t n_ctx, int32_t max_batch, bool f32_kv) {
    constexpr uint64_t kFixed = 8ull << 20;  // thread stacks, tables, I/O queues
    const uint64_t ctx = uint64_t(context_length(hp, n_ctx));
    const uint64_t kv =
        kv_layout_for(hp, int32_t(ctx), std::min<int64_t>(max_batch, int64_t(ctx))).bytes(f32_kv ? 4 : 2);
    const uint64_t widest = std::max({uint64_t(hp.n_embd), uint64_t(hp.n_ff), uint64_t(hp.n_ff_shared),
                                      sat_mul(uint64_t(hp.n_ff_expert), uint64_t(hp.n_expert_used)),
                                      sat_mul(uint64_t(hp.n_head), ctx)});
    const uint64_t scratch = sat_mul(sat_add(uint64_t(hp.n_vocab), sat_mul(8, widest)), sizeof(float));
    return sat_add(sat_add(kFixed, kv), scratch);
}

namespace {

moestream_io_mode requested_mode(const IoModeRequest &r, std::string *source) {
    if (!r.env_mode.empty()) {
        const auto m = parse_io_mode(r.env_mode);
        if (!m)
            fail(Status::invalid_argument, "MOESTREAM_IO_MODE='%.*s' is not one of auto, mmap, direct, pread",
                 static_cast<int>(std::min<size_t>(r.env_mode.size(), 32)), r.env_mode.data());
        *source = "MOESTREAM_IO_MODE=" + std::string(r.env_mode);
        return *m;
    }
    if (!io_mode_name(r.requested))
        fail(Status::invalid_argument, "io_mode %d is not a moestream_io_mode", r.requested);
    *source = std::string("io_mode=") + io_mode_name(r.requested);
    return static_cast<moestream_io_mode>(r.requested);
}

}  // namespace

IoModeChoice choose_io_mode(const IoModeRequest &r) {
    std::string source;
    const moestream_io_mode requested = requested_mode(r, &source);

    IoModeChoice c;
    c.budget = r.memory_budget ? r.memory_budget : automatic_memory_budget();
    const std::string budget_text = (r.memory_budget ? "budget " : "auto budget ") + human_bytes(c.budget);
    const uint64_t resident = sat_add(r.dense_bytes, r.overhead_bytes);
    c.budget_too_small = resident > c.budget;
    c.expert_cache_bytes = c.budget_too_small ? 0 : std::min(c.budget - resident, r.expert_bytes);
    const bool fits = r.model_bytes <= c.budget && r.overhead_bytes <= c.budget - r.model_bytes;
    const moestream_io_mode streaming = r.direct_io_available ? MOESTREAM_IO_DIRECT : MOESTREAM_IO_PREAD;
    const char *streaming_text = r.direct_io_available ? "direct I/O" : "buffered pread (no O_DIRECT here)";

    if (requested != MOESTREAM_IO_AUTO) {
        c.mode = requested;
        if (requested == MOESTREAM_IO_DIRECT && !r.direct_io_available) {
            c.mode = MOESTREAM_IO_PREAD;
            c.reason = source + " but O_DIRECT is unavailable for this file: pread";
        } else {
            c.reason = "requested by " + source;
        }
        if (c.mode == MOESTREAM_IO_MMAP && !fits)
            c.reason += format(" (model %s > %s)", human_bytes(r.model_bytes).c_str(), budget_text.c_str());
        else if (c.mode != MOESTREAM_IO_MMAP && c.budget_too_small)
            c.reason += format(" (%s too small for dense %s)", budget_text.c_str(), human_bytes(r.dense_bytes).c_str());
        else if (c.mode != MOESTREAM_IO_MMAP)
            c.reason += format(" (%s expert cache)", human_bytes(c.expert_cache_bytes).c_str());
        return c;
    }
    if (fits) {
        c.mode = MOESTREAM_IO_MMAP;
        c.expert_cache_bytes = 0;
        c.reason = format("model %s fits %s: mmap", human_bytes(r.model_bytes).c_str(), budget_text.c_str());
        return c;
    }
    c.mode = streaming;
    if (c.budget_too_small) {
        c.reason = format("%s too small: dense weights %s + %s overhead do not fit (%s needs more memory)",
                          budget_text.c_str(), human_bytes(r.dense_bytes).c_str(),
                          human_bytes(r.overhead_bytes).c_str(), streaming_text);
    } else {
        c.reason = format("model %s > %s: %s into a %s expert cache", human_bytes(r.model_bytes).c_str(),
                          budget_text.c_str(), streaming_text, human_bytes(c.expert_cache_bytes).c_str());
    }
    return c;
}

IoModeChoice choose_io_mode_from_env(IoModeRequest request) {
    const char *env = std::getenv("MOESTREAM_IO_MODE");
    request.env_mode = env ? std::string_view(env) : std::string_view();
    return choose_io_mode(request);
}

}  // namespace moe
