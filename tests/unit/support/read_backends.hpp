// Read backends standing in for a device in tests of the backend decorators
// and of the code that reads through them.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "io/forwarding_backend.hpp"
#include "io/read_backend.hpp"

namespace moe::test {

// Completes reads only when the test says so, with the result it says;
// records every submit and cancel.
class ScriptedBackend final : public io::ReadBackend {
public:
    explicit ScriptedBackend(uint32_t depth = 64) : depth_(depth) {}
    const char *name() const override { return "scripted"; }
    uint32_t add_file(int) override { return n_files_++; }
    uint32_t queue_depth() const override { return depth_; }
    uint32_t in_flight() const override { return in_flight_; }
    void submit(const io::ReadRequest &r) override;
    void cancel(uint64_t tag) override { cancelled.push_back(tag); }
    size_t reap(std::span<io::ReadCompletion> out, bool wait) override;
    void complete(uint64_t tag, int64_t result) { ready_.push_back(io::ReadCompletion{tag, result}); }

    std::vector<io::ReadRequest> submitted;
    std::vector<uint64_t> cancelled;

private:
    uint32_t depth_;
    uint32_t n_files_ = 0;
    uint32_t in_flight_ = 0;
    std::deque<io::ReadCompletion> ready_;
};

// A filesystem that accepts O_DIRECT at open() but refuses the reads: reads
// through a descriptor `refuses` picks (by default, those opened with
// O_DIRECT) come back -EINVAL without moving a byte. Records every submit.
class RefusingBackend final : public io::ForwardingBackend {
public:
    using Refuses = std::function<bool(int fd)>;
    static bool opened_direct(int fd);

    explicit RefusingBackend(std::unique_ptr<io::ReadBackend> inner, Refuses refuses = &opened_direct)
        : ForwardingBackend(std::move(inner)), refuses_(std::move(refuses)) {}
    uint32_t add_file(int fd) override;
    void submit(const io::ReadRequest &r) override;
    size_t reap(std::span<io::ReadCompletion> out, bool wait) override;

    std::vector<io::ReadRequest> submitted;
    uint64_t refused = 0;

private:
    Refuses refuses_;
    std::vector<bool> refused_files_;      // by file index
    std::map<uint64_t, bool> refusing_;    // tags in flight: true when refused
};

}  // namespace moe::test
