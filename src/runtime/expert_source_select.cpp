// Chooses where routed experts come from for a context: the mmap source (the
// GGUF mapping, residency steered with madvise within the budget's share for
// experts) or the streaming expert cache (direct or pread reads), as
// src/runtime/expert_source_factory.cpp decides.
#include "common/error.hpp"
#include "runtime/context.hpp"
#include "runtime/expert_source_factory.hpp"

namespace moe {

ExpertSourceChoice select_expert_source(const Model &model, const ContextParams &params, Stats &stats) {
    return make_expert_source(model, params, stats);
}

}  // namespace moe
