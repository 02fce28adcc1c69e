// libFuzzer target for the heat file reader of `trace synth --heat`
// (load_heat_file's small JSON reader, src/experts/trace_synth.cpp) and the
// synthesiser fed what it read: counts of any size, zeros, a k of any value.
//
// The reader must throw moe::Error (never Status::internal) or fill a
// rectangular matrix of finite, non-negative counts; small shapes then
// synthesise a few tokens, which must give a valid trace of that shape or a
// moe::Error.
#include <cmath>
#include <cstdint>

#include "common/error.hpp"
#include "experts/trace_synth.hpp"
#include "input_file.hpp"

namespace {

void require(bool ok) {
    if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static moe::fuzz::InputFile input;
    try {
        moe::SynthConfig config;
        moe::load_heat_file(input.holding(data, size), config);
        require(!config.heat.empty() && config.heat.size() == config.n_layer);
        for (const auto &row : config.heat) {
            require(row.size() == config.n_expert);
            for (double x : row) require(std::isfinite(x) && x >= 0);
        }
        if (uint64_t(config.n_layer) * config.n_expert > 4096) return 0;
        config.n_tokens = 16;
        config.window = data[size - 1] % 4;
        config.recall = config.window ? 0.5 : 0.0;
        const moe::RoutingTrace trace = moe::synthesize_trace(config);
        require(trace.n_tokens == config.n_tokens && trace.header.n_layer == config.n_layer &&
                trace.header.n_expert == config.n_expert && trace.header.n_expert_used == config.n_expert_used);
        for (uint16_t id : trace.ids) require(id == moe::kTraceNoExpert || id < config.n_expert);
    } catch (const moe::Error &e) {
        require(e.status() != moe::Status::internal);
    }
    return 0;
}
