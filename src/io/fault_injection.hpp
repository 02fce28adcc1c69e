// A ReadBackend decorator that makes chosen reads fail, come back short, or
// deliver corrupted bytes, to test how the engine copes with bad storage.
// Tests build it directly; an open context gets one when the environment
// variable MOESTREAM_FAULT_INJECT describes a fault plan (docs/errors.md,
// "Fault injection").
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "io/forwarding_backend.hpp"

namespace moe::io {

struct Fault {
    enum class Kind { none, error, short_read, corrupt };
    Kind kind = Kind::none;
    int error = 5;            // errno for Kind::error (default EIO)
    uint32_t short_by = 1;    // bytes missing for Kind::short_read
    uint32_t corrupt_at = 0;  // byte (within the read) flipped for Kind::corrupt
};

// Decides the fault for each read; `sequence` counts submitted reads from 0.
using FaultRule = std::function<Fault(const ReadRequest &request, uint64_t sequence)>;

class FaultInjectingBackend final : public ForwardingBackend {
public:
    FaultInjectingBackend(std::unique_ptr<ReadBackend> inner, FaultRule rule);
    void submit(const ReadRequest &request) override;
    size_t reap(std::span<ReadCompletion> out, bool wait) override;
    void set_rule(FaultRule rule) { rule_ = std::move(rule); }
    uint64_t faults_injected() const { return injected_; }

private:
    struct Pending {
        ReadRequest request;
        Fault fault;
        bool used = false;
    };
    FaultRule rule_;
    std::vector<Pending> pending_;  // one entry per read in flight
    uint64_t sequence_ = 0;
    uint64_t injected_ = 0;
};

inline constexpr const char *kFaultInjectEnv = "MOESTREAM_FAULT_INJECT";

// Which reads fail and how: `count` faults (0 = every read from then on),
// starting with the read numbered `after` (reads are numbered from 0 in
// submission order, demand reads and prefetches alike).
struct FaultPlan {
    Fault fault;
    bool corrupt_middle = true;  // Kind::corrupt without at=: flip the read's middle byte
    uint64_t after = 0;
    uint64_t count = 1;
    std::string spec;            // the text the plan was parsed from
};

// Parses "KIND[:KEY=VALUE]..." with KIND error, short or corrupt and keys
// errno= (error), bytes= (short: bytes missing, default 4096), at= (corrupt:
// byte flipped, default the middle of the read), after= and count= (any
// kind). Throws invalid_argument quoting the spec and the part it rejects.
FaultPlan parse_fault_plan(const std::string &spec);
// The plan in MOESTREAM_FAULT_INJECT; nullopt when it is unset or empty.
std::optional<FaultPlan> fault_plan_from_env();
// The rule that injects the plan's faults.
FaultRule make_fault_rule(const FaultPlan &plan);

}  // namespace moe::io
