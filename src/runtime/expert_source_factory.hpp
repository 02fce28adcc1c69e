// Builds the expert source a context uses: picks the I/O mode (params,
// MOESTREAM_IO_MODE, or automatically from the budget), sizes the expert cache
// (for mmap: the share of experts kept advised) from the memory budget, and
// finds a matching packed expert file and usage profile beside the model.
#pragma once

#include "runtime/context.hpp"

namespace moe {

ExpertSourceChoice make_expert_source(const Model &model, const ContextParams &params, Stats &stats);

}  // namespace moe
