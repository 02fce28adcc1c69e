// MOESTREAM_FAULT_INJECT plans: the parser accepts the documented syntax,
// rejects everything else naming the variable, and the rule gives each read
// the first fault whose reads (after .. after + count - 1) include it.
#include <gtest/gtest.h>

#include <string>

#include "common/error.hpp"
#include "io/fault_injection.hpp"

using moe::io::Fault;
using moe::io::FaultPlan;
using moe::io::PlannedFault;
using moe::io::parse_fault_plan;

namespace {

std::vector<uint64_t> faulted_reads(const FaultPlan &plan, uint64_t n_reads) {
    const moe::io::FaultRule rule = moe::io::make_fault_rule(plan);
    std::vector<uint64_t> out;
    moe::io::ReadRequest request;
    request.length = 1000;
    for (uint64_t seq = 0; seq < n_reads; ++seq)
        if (rule(request, seq).kind != Fault::Kind::none) out.push_back(seq);
    return out;
}

// The one fault of a plan that has one.
PlannedFault only(const std::string &spec) {
    const FaultPlan plan = parse_fault_plan(spec);
    EXPECT_EQ(plan.faults.size(), 1u) << spec;
    return plan.faults.empty() ? PlannedFault{} : plan.faults[0];
}

}  // namespace

TEST(FaultPlan, ParsesKindsAndKeys) {
    PlannedFault p = only("error");
    EXPECT_EQ(p.fault.kind, Fault::Kind::error);
    EXPECT_EQ(p.fault.error, 5);
    EXPECT_EQ(p.after, 0u);
    EXPECT_EQ(p.count, 1u);

    p = only("error:errno=28:after=7:count=3");
    EXPECT_EQ(p.fault.error, 28);
    EXPECT_EQ(p.after, 7u);
    EXPECT_EQ(p.count, 3u);

    p = only("short:bytes=12");
    EXPECT_EQ(p.fault.kind, Fault::Kind::short_read);
    EXPECT_EQ(p.fault.short_by, 12u);
    EXPECT_EQ(only("short").fault.short_by, 4096u);

    p = only("corrupt:at=3:count=0");
    EXPECT_EQ(p.fault.kind, Fault::Kind::corrupt);
    EXPECT_FALSE(p.corrupt_middle);
    EXPECT_EQ(p.fault.corrupt_at, 3u);
    EXPECT_EQ(p.count, 0u);

    p = only("delay:ms=250:after=2");
    EXPECT_EQ(p.fault.kind, Fault::Kind::delay);
    EXPECT_EQ(p.fault.delay_ms, 250u);
    EXPECT_EQ(p.after, 2u);
    EXPECT_EQ(only("delay").fault.delay_ms, 100u);
}

// Faults separated by commas: each read takes the first that chooses it.
TEST(FaultPlan, SeveralFaultsEachChooseTheirReads) {
    const FaultPlan plan = parse_fault_plan("error:after=1,delay:ms=7:after=3:count=0,short:count=0");
    ASSERT_EQ(plan.faults.size(), 3u);
    const moe::io::FaultRule rule = moe::io::make_fault_rule(plan);
    moe::io::ReadRequest request;
    request.length = 1000;
    const std::vector<Fault::Kind> want = {Fault::Kind::short_read, Fault::Kind::error, Fault::Kind::short_read,
                                           Fault::Kind::delay, Fault::Kind::delay};
    for (uint64_t seq = 0; seq < want.size(); ++seq) EXPECT_EQ(rule(request, seq).kind, want[seq]) << seq;
    EXPECT_EQ(rule(request, 4).delay_ms, 7u);
}

TEST(FaultPlan, RejectsMalformedPlansNamingTheVariable) {
    for (const char *bad : {"", "boom", "error:", "error:errno", "error:errno=", "error:errno=0", "error:errno=abc",
                            "error:bytes=3", "short:errno=5", "short:bytes=0", "corrupt:after=-1",
                            "corrupt:count=1x", "error:after=99999999999999999999999", "Error", "delay:at=3",
                            "delay:ms=-1", "error,", ",error", "error;short"}) {
        try {
            parse_fault_plan(bad);
            ADD_FAILURE() << "accepted '" << bad << "'";
        } catch (const moe::Error &e) {
            EXPECT_EQ(e.status(), moe::Status::invalid_argument) << bad;
            EXPECT_NE(std::string(e.what()).find("MOESTREAM_FAULT_INJECT"), std::string::npos) << e.what();
        }
    }
}

TEST(FaultPlan, RuleFaultsTheChosenReads) {
    EXPECT_EQ(faulted_reads(parse_fault_plan("error"), 10), (std::vector<uint64_t>{0}));
    EXPECT_EQ(faulted_reads(parse_fault_plan("error:after=4:count=2"), 10), (std::vector<uint64_t>{4, 5}));
    EXPECT_EQ(faulted_reads(parse_fault_plan("short:after=7:count=0"), 10), (std::vector<uint64_t>{7, 8, 9}));
    EXPECT_TRUE(faulted_reads(parse_fault_plan("error:after=10"), 10).empty());

    const moe::io::FaultRule middle = moe::io::make_fault_rule(parse_fault_plan("corrupt"));
    moe::io::ReadRequest request;
    request.length = 8192;
    EXPECT_EQ(middle(request, 0).corrupt_at, 4096u);
    const moe::io::FaultRule at = moe::io::make_fault_rule(parse_fault_plan("corrupt:at=9"));
    EXPECT_EQ(at(request, 0).corrupt_at, 9u);
}
