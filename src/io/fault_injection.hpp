// A ReadBackend decorator that makes chosen reads fail, come back short,
// deliver corrupted bytes or come back late, to test how the engine copes
// with bad or slow storage. Tests build it directly; an open context gets one
// when the environment variable MOESTREAM_FAULT_INJECT describes a fault plan
// (docs/errors.md, "Fault injection").
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "io/forwarding_backend.hpp"

namespace moe::io {

struct Fault {
    enum class Kind { none, error, short_read, corrupt, delay };
    Kind kind = Kind::none;
    int error = 5;            // errno for Kind::error (default EIO)
    uint32_t short_by = 1;    // bytes missing for Kind::short_read
    uint32_t corrupt_at = 0;  // byte (within the read) flipped for Kind::corrupt
    uint32_t delay_ms = 0;    // Kind::delay: handed back no sooner than this after its submission
};

// Decides the fault for each read; `sequence` counts submitted reads from 0.
using FaultRule = std::function<Fault(const ReadRequest &request, uint64_t sequence)>;

// What a consumer blocks on when nothing but delayed reads is in flight: the
// first one's due time or release(), whichever comes first. Shared, so a test
// can keep it past the backend: it holds reads in flight with a long delay
// and releases them once it has seen a consumer block waiting for them.
class DelayGate {
public:
    using Clock = std::chrono::steady_clock;
    void wait_until(Clock::time_point due);
    // Ends every delay, now and from then on.
    void release();
    bool released() const;
    // Waits until a consumer blocks in wait_until; false when `timeout`
    // passes or release() comes first.
    bool await_waiter(std::chrono::milliseconds timeout);

private:
    mutable std::mutex mu_;
    std::condition_variable cv_;
    uint32_t waiting_ = 0;
    bool released_ = false;
};

class FaultInjectingBackend final : public ForwardingBackend {
public:
    FaultInjectingBackend(std::unique_ptr<ReadBackend> inner, FaultRule rule);
    // Delayed reads stay in flight, from the caller's side, until handed back.
    uint32_t in_flight() const override;
    void submit(const ReadRequest &request) override;
    // A delayed read is handed back by the first reap at or after its due
    // time. Waiting with only delayed reads in flight blocks on the gate.
    size_t reap(std::span<ReadCompletion> out, bool wait) override;
    void set_rule(FaultRule rule) { rule_ = std::move(rule); }
    uint64_t faults_injected() const { return injected_; }
    const std::shared_ptr<DelayGate> &delay_gate() const { return gate_; }

private:
    struct Pending {
        ReadRequest request;
        Fault fault;
        DelayGate::Clock::time_point due;  // Kind::delay
        bool used = false;
    };
    struct Held {
        ReadCompletion completion;
        DelayGate::Clock::time_point due;
    };
    // Applies the faults to completions the inner backend handed back; the
    // delayed ones move to held_. Returns how many stay, packed at the front.
    size_t apply_faults(std::span<ReadCompletion> got);
    // Moves the held completions that are due into `out`; returns how many.
    size_t hand_over_due(std::span<ReadCompletion> out);
    FaultRule rule_;
    std::vector<Pending> pending_;  // one entry per read in flight in the inner backend
    std::vector<Held> held_;        // delayed reads the inner backend has finished
    std::shared_ptr<DelayGate> gate_ = std::make_shared<DelayGate>();
    uint64_t sequence_ = 0;
    uint64_t injected_ = 0;
};

inline constexpr const char *kFaultInjectEnv = "MOESTREAM_FAULT_INJECT";

// One fault of a plan: what the reads it chooses do, and which reads: `count`
// of them (0 = every read from then on), starting with the read numbered
// `after` (reads are numbered from 0 in submission order, demand reads and
// prefetches alike).
struct PlannedFault {
    Fault fault;
    bool corrupt_middle = true;  // Kind::corrupt without at=: flip the read's middle byte
    uint64_t after = 0;
    uint64_t count = 1;
};

// A read takes the first fault of the plan that chooses it.
struct FaultPlan {
    std::vector<PlannedFault> faults;
    std::string spec;  // the text the plan was parsed from
};

// Parses "FAULT[,FAULT]..." where each FAULT is "KIND[:KEY=VALUE]..." with
// KIND error, short, corrupt or delay and keys errno= (error), bytes= (short:
// bytes missing, default 4096), at= (corrupt: byte flipped, default the
// middle of the read), ms= (delay: milliseconds, default 100), after= and
// count= (any kind). Throws invalid_argument quoting the spec and the part it
// rejects.
FaultPlan parse_fault_plan(const std::string &spec);
// The plan in MOESTREAM_FAULT_INJECT; nullopt when it is unset or empty.
std::optional<FaultPlan> fault_plan_from_env();
// The rule that injects the plan's faults.
FaultRule make_fault_rule(const FaultPlan &plan);

}  // namespace moe::io
