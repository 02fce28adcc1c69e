// Chooses where routed experts come from for a context: the resident source
// (the GGUF mapping; the page cache holds experts) or the streaming expert
// cache, as src/experts/expert_source_factory.cpp decides.
#include "common/error.hpp"
#include "experts/expert_source_factory.hpp"
#include "runtime/context.hpp"

namespace moe {

ExpertSourceChoice select_expert_source(const Model &model, const ContextParams &params, Stats &stats) {
    return make_expert_source(model, params, stats);
}

}  // namespace moe
