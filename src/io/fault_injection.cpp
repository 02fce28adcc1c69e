#include "io/fault_injection.hpp"

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <vector>

#include "common/error.hpp"

namespace moe::io {

FaultInjectingBackend::FaultInjectingBackend(std::unique_ptr<ReadBackend> inner, FaultRule rule)
    : ForwardingBackend(std::move(inner)), rule_(std::move(rule)) {
    pending_.resize(ForwardingBackend::queue_depth());
}

void FaultInjectingBackend::submit(const ReadRequest &request) {
    const Fault fault = rule_ ? rule_(request, sequence_) : Fault{};
    ++sequence_;
    for (auto &p : pending_) {
        if (p.used) continue;
        p = Pending{request, fault, true};
        break;
    }
    inner().submit(request);
}

size_t FaultInjectingBackend::reap(std::span<ReadCompletion> out, bool wait) {
    const size_t n = inner().reap(out, wait);
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

}  // namespace

FaultPlan parse_fault_plan(const std::string &spec) {
    FaultPlan plan;
    plan.spec = spec;
    std::vector<std::string> parts;
    for (size_t start = 0;;) {
        const size_t colon = spec.find(':', start);
        parts.push_back(spec.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
        if (colon == std::string::npos) break;
        start = colon + 1;
    }
    const std::string &kind = parts[0];
    if (kind == "error") {
        plan.fault.kind = Fault::Kind::error;
    } else if (kind == "short") {
        plan.fault.kind = Fault::Kind::short_read;
        plan.fault.short_by = 4096;
    } else if (kind == "corrupt") {
        plan.fault.kind = Fault::Kind::corrupt;
    } else {
        fail(Status::invalid_argument, "%s='%s': the fault kind '%s' is not error, short or corrupt", kFaultInjectEnv,
             spec.c_str(), kind.c_str());
    }
    for (size_t i = 1; i < parts.size(); ++i) {
        const size_t eq = parts[i].find('=');
        const std::string key = parts[i].substr(0, eq);
        const std::string value = eq == std::string::npos ? std::string() : parts[i].substr(eq + 1);
        if (eq == std::string::npos)
            fail(Status::invalid_argument, "%s='%s': '%s' is not KEY=VALUE", kFaultInjectEnv, spec.c_str(),
                 parts[i].c_str());
        if (key == "after") {
            plan.after = parse_count(spec, key, value, std::numeric_limits<uint64_t>::max());
        } else if (key == "count") {
            plan.count = parse_count(spec, key, value, std::numeric_limits<uint64_t>::max());
        } else if (key == "errno" && plan.fault.kind == Fault::Kind::error) {
            plan.fault.error = int(parse_count(spec, key, value, 4095));
            if (plan.fault.error == 0)
                fail(Status::invalid_argument, "%s='%s': errno=0 is not an error", kFaultInjectEnv, spec.c_str());
        } else if (key == "bytes" && plan.fault.kind == Fault::Kind::short_read) {
            plan.fault.short_by = uint32_t(parse_count(spec, key, value, std::numeric_limits<uint32_t>::max()));
            if (plan.fault.short_by == 0)
                fail(Status::invalid_argument, "%s='%s': bytes=0 would not shorten the read", kFaultInjectEnv,
                     spec.c_str());
        } else if (key == "at" && plan.fault.kind == Fault::Kind::corrupt) {
            plan.fault.corrupt_at = uint32_t(parse_count(spec, key, value, std::numeric_limits<uint32_t>::max()));
            plan.corrupt_middle = false;
        } else {
            fail(Status::invalid_argument, "%s='%s': '%s' does not apply to %s faults (keys: after, count, %s)",
                 kFaultInjectEnv, spec.c_str(), key.c_str(), kind.c_str(),
                 kind == "error" ? "errno" : kind == "short" ? "bytes" : "at");
        }
    }
    return plan;
}

std::optional<FaultPlan> fault_plan_from_env() {
    const char *v = std::getenv(kFaultInjectEnv);
    if (!v || !*v) return std::nullopt;
    return parse_fault_plan(v);
}

FaultRule make_fault_rule(const FaultPlan &plan) {
    return [plan](const ReadRequest &request, uint64_t sequence) {
        if (sequence < plan.after || (plan.count != 0 && sequence - plan.after >= plan.count)) return Fault{};
        Fault f = plan.fault;
        if (f.kind == Fault::Kind::corrupt && plan.corrupt_middle) f.corrupt_at = request.length / 2;
        return f;
    };
}

}  // namespace moe::io
