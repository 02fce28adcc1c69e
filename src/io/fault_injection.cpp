#include "io/fault_injection.hpp"

namespace moe::io {

FaultInjectingBackend::FaultInjectingBackend(std::unique_ptr<ReadBackend> inner, FaultRule rule)
    : inner_(std::move(inner)), rule_(std::move(rule)) {
    pending_.resize(inner_->queue_depth());
}

void FaultInjectingBackend::submit(const ReadRequest &request) {
    const Fault fault = rule_ ? rule_(request, sequence_) : Fault{};
    ++sequence_;
    for (auto &p : pending_) {
        if (p.used) continue;
        p = Pending{request, fault, true};
        break;
    }
    inner_->submit(request);
}

size_t FaultInjectingBackend::reap(std::span<ReadCompletion> out, bool wait) {
    const size_t n = inner_->reap(out, wait);
    for (size_t i = 0; i < n; ++i) {
        ReadCompletion &c = out[i];
        for (auto &p : pending_) {
            if (!p.used || p.request.tag != c.tag) continue;
            p.used = false;
            if (c.result < 0) break;
            switch (p.fault.kind) {
            case Fault::Kind::none: break;
            case Fault::Kind::error:
                c.result = -p.fault.error;
                ++injected_;
                break;
            case Fault::Kind::short_read:
                c.result = c.result > p.fault.short_by ? c.result - p.fault.short_by : 0;
                ++injected_;
                break;
            case Fault::Kind::corrupt:
                if (p.fault.corrupt_at < c.result) p.request.dest[p.fault.corrupt_at] ^= 0x5a;
                ++injected_;
                break;
            }
            break;
        }
    }
    return n;
}

}  // namespace moe::io
