// The seam between the forward pass and expert placement.
//
// A MoE layer asks for the unique experts its tokens routed to, then takes them
// one at a time in the order their bytes become available: experts already in
// memory come back at once, missing ones as their reads complete. The forward
// pass computes each expert as it arrives and sums the outputs in top-k slot
// order afterwards, so the result never depends on arrival order.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "model/expert_layout.hpp"

namespace moe::io {
class ObservedBackend;
}

namespace moe {

// Pointers to one expert's three matrices, each laid out exactly as in the GGUF
// (rows consecutive, row = cols elements of the matrix's type).
struct ExpertView {
    const uint8_t *gate = nullptr;
    const uint8_t *up = nullptr;
    const uint8_t *down = nullptr;
};

// Expert e's matrices inside the read-only mapping (the layout's `mapped`
// pointers), for sources that compute straight from the mapped file.
inline ExpertView mapped_expert_view(const ExpertLayerLayout &lay, int32_t e) {
    ExpertView v;
    if (lay.gate.mapped) v.gate = lay.gate.mapped + uint64_t(e) * lay.gate.expert_stride;
    v.up = lay.up.mapped + uint64_t(e) * lay.up.expert_stride;
    v.down = lay.down.mapped + uint64_t(e) * lay.down.expert_stride;
    return v;
}

struct ReadyExpert {
    int32_t expert = -1;
    ExpertView view;
};

class ExpertSource {
public:
    virtual ~ExpertSource() = default;

    // Demand: the unique experts layer `layer` needs now. Hits are ready at
    // once; misses are queued ahead of every prefetch. Views stay valid (the
    // experts cannot be evicted) until end_layer(layer).
    virtual void begin_layer(int32_t layer, std::span<const int32_t> experts) = 0;
    // Blocks until one requested expert not yet returned is ready. Call it
    // exactly experts.size() times per begin_layer. Throws moe::Error(io) with
    // the layer, expert and errno when a read fails.
    virtual ReadyExpert next_ready() = 0;
    // The same without blocking: true and `out` set when an expert not yet
    // returned is available right now (counts as one of the next_ready calls).
    // Lets the caller compute everything that has landed as one group instead
    // of one hand-off per expert. Sources that cannot tell answer false.
    virtual bool try_next_ready(ReadyExpert &out) {
        (void)out;
        return false;
    }
    // Takes the reads that have completed and starts queued ones, without
    // blocking. The forward pass calls it between compute tasks, so a
    // finished read is followed by the next one at once instead of after the
    // running group of experts. Hands nothing out; views stay valid.
    virtual void progress() {}
    // Releases the pins taken by begin_layer.
    virtual void end_layer(int32_t layer) = 0;
    // Hint: these experts of `layer` will probably be needed soon, most likely
    // first, predicted `distance` layers ahead of the running one (1 = the
    // next layer). Never delays demand reads; may be ignored in part or whole.
    // A newer hint for the same layer and distance replaces the older one.
    virtual void prefetch(int32_t layer, std::span<const int32_t> experts, int32_t distance = 1) = 0;
    // Waits for every read in flight (before state save/load and close).
    virtual void drain() = 0;
    // The expert reads this source issues itself, watched for busy time and
    // optionally logged; nullptr when the source reads through a mapping.
    virtual io::ObservedBackend *observed_reads() const { return nullptr; }
};

}  // namespace moe
