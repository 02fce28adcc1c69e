// Replays a logged stream of reads against the device: the same files,
// offsets and lengths in the same order, with O_DIRECT (buffered where the
// filesystem refuses it, as the engine does), through a read backend kept
// `depth` reads deep. The bandwidth it reaches is what the
// device delivers for exactly the requests the engine made.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "io/observed_backend.hpp"
#include "io/read_backend.hpp"

namespace moe::io {

struct ReplayFigures {
    uint64_t reads = 0;
    uint64_t bytes = 0;
    uint64_t elapsed_ns = 0;        // first submit to last completion
    uint64_t buffered_reads = 0;    // reads O_DIRECT could not take (unaligned, or refused by the filesystem)
    uint32_t depth = 0;
    std::string backend;
};

// `path_of(file)` names the file behind a logged file index. Throws
// moe::Error(io) naming the file and offset when a read fails (a read that
// comes back short, at the end of the file, counts the bytes it got, as the
// engine's last aligned slice does), moe::Error(invalid_argument) for a file
// index without a path. `backend_override` replaces the backend made from
// `kind` (tests).
ReplayFigures replay_reads(std::span<const LoggedRead> reads, const ObservedBackend &names, uint32_t depth,
                           BackendKind kind = BackendKind::automatic,
                           std::unique_ptr<ReadBackend> backend_override = nullptr);

}  // namespace moe::io
