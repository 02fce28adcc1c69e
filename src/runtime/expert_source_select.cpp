// Chooses where routed experts come from for a context. The resident source
// serves them straight from the GGUF mapping (the page cache holds them).
#include "common/error.hpp"
#include "experts/resident_expert_source.hpp"
#include "runtime/context.hpp"

namespace moe {

ExpertSourceChoice select_expert_source(const Model &model, const ContextParams &params, Stats &stats) {
    ExpertSourceChoice c;
    switch (params.io_mode) {
    case MOESTREAM_IO_AUTO:
    case MOESTREAM_IO_MMAP:
        c.source = std::make_unique<ResidentExpertSource>(model.expert_layouts(), &stats);
        c.io_mode = MOESTREAM_IO_MMAP;
        c.reason = params.io_mode == MOESTREAM_IO_MMAP ? "mmap requested" : "experts served from the file mapping";
        c.resident = true;
        return c;
    default:
        fail(Status::unsupported, "io_mode %d (%s) is not available in this build", params.io_mode,
             params.io_mode == MOESTREAM_IO_DIRECT ? "direct" : "pread");
    }
}

}  // namespace moe
