#include "io/fault_injection.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <vector>

#include "common/error.hpp"

namespace moe::io {

void DelayGate::wait_until(Clock::time_point due) {
    std::unique_lock lock(mu_);
    ++waiting_;
    cv_.notify_all();
    cv_.wait_until(lock, due, [&] { return released_; });
    --waiting_;
}

void DelayGate::release() {
    {
        std::lock_guard lock(mu_);
        released_ = true;
    }
    cv_.notify_all();
}

bool DelayGate::released() const {
    std::lock_guard lock(mu_);
    return released_;
}

bool DelayGate::await_waiter(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return waiting_ > 0 || released_; });
    return waiting_ > 0;
}

FaultInjectingBackend::FaultInjectingBackend(std::unique_ptr<ReadBackend> inner, FaultRule rule)
    : ForwardingBackend(std::move(inner)), rule_(std::move(rule)) {
    pending_.resize(ForwardingBackend::queue_depth());
    held_.reserve(ForwardingBackend::queue_depth());
}

uint32_t FaultInjectingBackend::in_flight() const { return inner().in_flight() + uint32_t(held_.size()); }

void FaultInjectingBackend::submit(const ReadRequest &request) {
    const Fault fault = rule_ ? rule_(request, sequence_) : Fault{};
    const auto due = DelayGate::Clock::now() + std::chrono::milliseconds(fault.delay_ms);
    inner().submit(request);  // may throw: number and track the read only once it is queued
    ++sequence_;
    for (auto &p : pending_) {
        if (p.used) continue;
        p = Pending{request, fault, due, true};
        break;
    }
}

size_t FaultInjectingBackend::apply_faults(std::span<ReadCompletion> got) {
    size_t kept = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        ReadCompletion c = got[i];
        auto p = std::find_if(pending_.begin(), pending_.end(),
                              [&](const Pending &q) { return q.used && q.request.tag == c.tag; });
        if (p != pending_.end()) {
            p->used = false;
            const Fault &f = p->fault;
            if (f.kind == Fault::Kind::delay) {
                ++injected_;
                held_.push_back(Held{c, p->due});  // within the queue depth reserved
                continue;
            }
            if (c.result >= 0 && f.kind != Fault::Kind::none) {
                ++injected_;
                if (f.kind == Fault::Kind::error) c.result = -f.error;
                if (f.kind == Fault::Kind::short_read) c.result = c.result > f.short_by ? c.result - f.short_by : 0;
                if (f.kind == Fault::Kind::corrupt && f.corrupt_at < c.result) p->request.dest[f.corrupt_at] ^= 0x5a;
            }
        }
        got[kept++] = c;
    }
    return kept;
}

size_t FaultInjectingBackend::hand_over_due(std::span<ReadCompletion> out) {
    if (held_.empty()) return 0;
    const bool all = gate_->released();
    const auto now = DelayGate::Clock::now();
    size_t n = 0, kept = 0;
    for (const Held &h : held_) {
        if (n < out.size() && (all || h.due <= now))
            out[n++] = h.completion;
        else
            held_[kept++] = h;
    }
    held_.resize(kept);
    return n;
}

size_t FaultInjectingBackend::reap(std::span<ReadCompletion> out, bool wait) {
    for (;;) {
        size_t n = hand_over_due(out);
        if (n < out.size()) {
            // A held read that comes due meanwhile waits for this one: it is
            // handed back no sooner than its time, and a little later at most.
            const size_t got = inner().reap(out.subspan(n), wait && n == 0);
            n += apply_faults(out.subspan(n, got));
        }
        if (n > 0 || !wait || in_flight() == 0) return n;
        if (inner().in_flight() == 0) {
            // Nothing but delayed reads is out: sleep until the first is due.
            auto first = held_.front().due;
            for (const Held &h : held_) first = std::min(first, h.due);
            gate_->wait_until(first);
        }
    }
}

}  // namespace moe::io

// --- fault plans from the environment ----------------------------------------

namespace moe::io {
namespace {

uint64_t parse_count(const std::string &spec, const std::string &key, const std::string &value, uint64_t max) {
    char *end = nullptr;
    errno = 0;
    const unsigned long long n = value.empty() || value[0] == '-' ? 0 : std::strtoull(value.c_str(), &end, 10);
    if (value.empty() || value[0] == '-' || errno != 0 || !end || *end != '\0' || n > max)
        fail(Status::invalid_argument, "%s='%s': %s=%s is not a whole number up to %llu", kFaultInjectEnv,
             spec.c_str(), key.c_str(), value.c_str(), static_cast<unsigned long long>(max));
    return n;
}

std::vector<std::string> split(const std::string &text, char sep) {
    std::vector<std::string> parts;
    for (size_t start = 0;;) {
        const size_t at = text.find(sep, start);
        parts.push_back(text.substr(start, at == std::string::npos ? std::string::npos : at - start));
        if (at == std::string::npos) return parts;
        start = at + 1;
    }
}

// One "KIND[:KEY=VALUE]..." of the plan `spec`.
PlannedFault parse_fault(const std::string &spec, const std::string &text) {
    PlannedFault planned;
    Fault &fault = planned.fault;
    const std::vector<std::string> parts = split(text, ':');
    const std::string &kind = parts[0];
    static constexpr struct {
        const char *name;
        Fault::Kind kind;
        const char *key;  // its own, besides after= and count=
    } kKinds[] = {{"error", Fault::Kind::error, "errno"},
                  {"short", Fault::Kind::short_read, "bytes"},
                  {"corrupt", Fault::Kind::corrupt, "at"},
                  {"delay", Fault::Kind::delay, "ms"}};
    const auto *known = std::find_if(std::begin(kKinds), std::end(kKinds), [&](const auto &k) { return kind == k.name; });
    if (known == std::end(kKinds))
        fail(Status::invalid_argument, "%s='%s': the fault kind '%s' is not error, short, corrupt or delay",
             kFaultInjectEnv, spec.c_str(), kind.c_str());
    fault.kind = known->kind;
    const char *own_key = known->key;
    if (fault.kind == Fault::Kind::short_read) fault.short_by = 4096;
    if (fault.kind == Fault::Kind::delay) fault.delay_ms = 100;
    constexpr uint64_t kMax32 = std::numeric_limits<uint32_t>::max(), kMax64 = std::numeric_limits<uint64_t>::max();
    for (size_t i = 1; i < parts.size(); ++i) {
        const size_t eq = parts[i].find('=');
        const std::string key = parts[i].substr(0, eq);
        const std::string value = eq == std::string::npos ? std::string() : parts[i].substr(eq + 1);
        if (eq == std::string::npos)
            fail(Status::invalid_argument, "%s='%s': '%s' is not KEY=VALUE", kFaultInjectEnv, spec.c_str(),
                 parts[i].c_str());
        if (key == "after") {
            planned.after = parse_count(spec, key, value, kMax64);
        } else if (key == "count") {
            planned.count = parse_count(spec, key, value, kMax64);
        } else if (key != own_key) {
            fail(Status::invalid_argument, "%s='%s': '%s' does not apply to %s faults (keys: after, count, %s)",
                 kFaultInjectEnv, spec.c_str(), key.c_str(), kind.c_str(), own_key);
        } else if (fault.kind == Fault::Kind::error) {
            fault.error = int(parse_count(spec, key, value, 4095));
            if (fault.error == 0)
                fail(Status::invalid_argument, "%s='%s': errno=0 is not an error", kFaultInjectEnv, spec.c_str());
        } else if (fault.kind == Fault::Kind::short_read) {
            fault.short_by = uint32_t(parse_count(spec, key, value, kMax32));
            if (fault.short_by == 0)
                fail(Status::invalid_argument, "%s='%s': bytes=0 would not shorten the read", kFaultInjectEnv,
                     spec.c_str());
        } else if (fault.kind == Fault::Kind::corrupt) {
            fault.corrupt_at = uint32_t(parse_count(spec, key, value, kMax32));
            planned.corrupt_middle = false;
        } else {
            fault.delay_ms = uint32_t(parse_count(spec, key, value, kMax32));
        }
    }
    return planned;
}

}  // namespace

FaultPlan parse_fault_plan(const std::string &spec) {
    FaultPlan plan;
    plan.spec = spec;
    for (const std::string &text : split(spec, ',')) plan.faults.push_back(parse_fault(spec, text));
    return plan;
}

std::optional<FaultPlan> fault_plan_from_env() {
    const char *v = std::getenv(kFaultInjectEnv);
    if (!v || !*v) return std::nullopt;
    return parse_fault_plan(v);
}

FaultRule make_fault_rule(const FaultPlan &plan) {
    return [plan](const ReadRequest &request, uint64_t sequence) {
        for (const PlannedFault &p : plan.faults) {
            if (sequence < p.after || (p.count != 0 && sequence - p.after >= p.count)) continue;
            Fault f = p.fault;
            if (f.kind == Fault::Kind::corrupt && p.corrupt_middle) f.corrupt_at = request.length / 2;
            return f;
        }
        return Fault{};
    };
}

}  // namespace moe::io
