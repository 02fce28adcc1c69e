// A ReadBackend decorator that watches the reads passing through it:
// - device busy time: the wall time during which at least one read was in
//   flight (the union of the reads' intervals, so overlapping reads count
//   once and idle gaps not at all), with the bytes and reads completed;
// - an optional bounded log of the reads submitted (file, offset, length),
//   so the exact request stream can be replayed against the device later.
//
// A read counts as in flight from submit() until reap() hands over its
// completion: the owner reaps between experts' compute, so busy time can run
// past the device's own finish by up to one such gap, never short of it.
// Costs per call: one clock read per submit and per reap that returns
// completions; the log is reserved when started, so recording never allocates.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/forwarding_backend.hpp"

namespace moe::io {

struct LoggedRead {
    uint64_t offset = 0;
    uint32_t length = 0;
    uint32_t file = 0;  // backend file index (ReadRequest::file)
};

struct IoActivity {
    uint64_t busy_ns = 0;  // wall time with at least one read in flight
    uint64_t bytes = 0;    // bytes completed reads returned
    uint64_t reads = 0;    // completions seen (failed and cancelled included)
    // Sum over reads of the time each was in flight (= the integral of the
    // reads in flight over time): / busy_ns is the mean depth while busy.
    uint64_t read_ns = 0;
};

class ObservedBackend final : public ForwardingBackend {
public:
    using Clock = uint64_t (*)();  // nanoseconds, monotonic
    static uint64_t steady_now_ns();

    explicit ObservedBackend(std::unique_ptr<ReadBackend> inner, Clock clock = &steady_now_ns);

    uint32_t add_file(int fd) override;
    void submit(const ReadRequest &request) override;
    size_t reap(std::span<ReadCompletion> out, bool wait) override;

    // Busy time so far, including the busy period running now.
    IoActivity activity() const;
    // Starts counting from zero now (a busy period in progress counts from now).
    void reset_activity();

    // The path behind a file index, for replaying the log ("" if never named).
    void name_file(uint32_t file, std::string path);
    const std::string &file_path(uint32_t file) const;
    size_t n_files() const { return paths_.size(); }

    // Starts (or restarts) the log with room for `capacity` reads; reads
    // beyond it are counted, not kept. capacity 0 stops logging and frees it.
    void start_log(size_t capacity);
    std::span<const LoggedRead> log() const { return log_; }
    uint64_t log_dropped() const { return dropped_; }
    bool logging() const { return log_capacity_ > 0; }

private:
    Clock clock_;
    void advance(uint64_t now) {
        done_.read_ns += uint64_t(pending_) * (now - last_event_);
        last_event_ = now;
    }

    uint32_t pending_ = 0;       // submitted, completion not reaped yet
    uint64_t busy_since_ = 0;    // start of the busy period when pending_ > 0
    uint64_t last_event_ = 0;    // last submit or reap, for read_ns
    IoActivity done_;            // closed busy periods
    std::vector<std::string> paths_;
    std::vector<LoggedRead> log_;
    size_t log_capacity_ = 0;
    uint64_t dropped_ = 0;
};

}  // namespace moe::io
