// Base of ReadBackend decorators: passes every call to the backend it wraps,
// so a decorator overrides only the calls it watches or changes.
#pragma once

#include <memory>
#include <span>
#include <utility>

#include "io/read_backend.hpp"

namespace moe::io {

class ForwardingBackend : public ReadBackend {
public:
    explicit ForwardingBackend(std::unique_ptr<ReadBackend> inner) : inner_(std::move(inner)) {}

    const char *name() const override { return inner_->name(); }
    uint32_t add_file(int fd) override { return inner_->add_file(fd); }
    void register_memory(std::span<const MemoryRegion> regions) override { inner_->register_memory(regions); }
    bool memory_pinned() const override { return inner_->memory_pinned(); }
    uint32_t queue_depth() const override { return inner_->queue_depth(); }
    uint32_t in_flight() const override { return inner_->in_flight(); }
    void submit(const ReadRequest &request) override { inner_->submit(request); }
    void cancel(uint64_t tag) override { inner_->cancel(tag); }
    size_t reap(std::span<ReadCompletion> out, bool wait) override { return inner_->reap(out, wait); }

    // The backend this one wraps (tests look down a chain for a decorator).
    ReadBackend &inner() { return *inner_; }
    const ReadBackend &inner() const { return *inner_; }

private:
    std::unique_ptr<ReadBackend> inner_;
};

}  // namespace moe::io
