// The expert read log and its replay against the device.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "context_handle.hpp"
#include "firewall.hpp"
#include "io/observed_backend.hpp"
#include "io/read_replay.hpp"

namespace {

using moe::capi::ContextUse;
using moe::capi::guarded;

moe::io::ObservedBackend &observed_reads(moe::Context &ctx) {
    moe::io::ObservedBackend *reads = ctx.expert_source().observed_reads();
    if (!reads)
        moe::fail(moe::Status::unsupported,
                  "this context reads experts through the model's mapping: it issues no expert reads to log");
    return *reads;
}

}  // namespace

extern "C" {

MOESTREAM_API int moestream_read_log_start(moestream_context *ctx, uint64_t capacity) {
    return guarded("moestream_read_log_start", [&] {
        ContextUse use(ctx);
        // 16 bytes an entry: a bound far past any run keeps a typo from asking for the whole machine.
        constexpr uint64_t kMaxEntries = uint64_t(1) << 28;
        if (capacity > kMaxEntries)
            moe::fail(moe::Status::invalid_argument, "read log capacity %llu exceeds %llu entries",
                      (unsigned long long)capacity, (unsigned long long)kMaxEntries);
        observed_reads(*use).start_log(size_t(capacity));
    });
}

MOESTREAM_API void moestream_read_replay_init(moestream_read_replay *replay) {
    if (!replay) return;
    std::memset(replay, 0, sizeof *replay);
    replay->struct_size = sizeof *replay;
}

MOESTREAM_API int moestream_read_log_replay(moestream_context *ctx, moestream_read_replay *replay) {
    return guarded("moestream_read_log_replay", [&] {
        moe::capi::require(replay, "replay");
        moe::capi::require_struct_size(replay->struct_size, sizeof *replay, "moestream_read_replay");
        if (replay->queue_depth < 0 || replay->queue_depth > 4096)
            moe::fail(moe::Status::invalid_argument, "replay.queue_depth %d is outside 0..4096", replay->queue_depth);
        ContextUse use(ctx);
        moe::io::ObservedBackend &reads = observed_reads(*use);
        if (!reads.logging())
            moe::fail(moe::Status::invalid_argument, "no read log: call moestream_read_log_start first");
        // The engine's own reads in flight would share the device with the replay.
        use->expert_source().drain();
        const uint32_t engine_depth = reads.queue_depth();
        const uint32_t depth = replay->queue_depth > 0 ? uint32_t(replay->queue_depth) : engine_depth;
        const auto kind = std::strcmp(reads.name(), "pread") == 0 ? moe::io::BackendKind::pread
                                                                  : moe::io::BackendKind::automatic;
        const moe::io::ReplayFigures f = moe::io::replay_reads(reads.log(), reads, depth, kind);
        moestream_read_replay out;
        moestream_read_replay_init(&out);
        out.queue_depth = int32_t(f.depth);
        out.engine_queue_depth = int32_t(engine_depth);
        out.reads = f.reads;
        out.dropped = reads.log_dropped();
        out.bytes = f.bytes;
        out.elapsed_ns = f.elapsed_ns;
        out.buffered_reads = f.buffered_reads;
        std::snprintf(out.backend, sizeof out.backend, "%s", f.backend.c_str());
        *replay = out;
    });
}

}  // extern "C"
