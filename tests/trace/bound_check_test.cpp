// The bound oracle (vmm/trace/bound_check.h) on synthetic timelines: it must
// fail a trace where a bypass breaks pvbounded's invariant (a steal past a
// queue head older than T, running, halted awaiting its wake-up or
// descheduled alike, since newcomers reserve for a due head; a queue jump; a
// borrow with lending off) and pass one where every bypass is allowed (young
// waiter, older waiters served in order) or explained by a host event (the
// head descheduled right after it arrived, so its own t0 is younger; the
// stealer descheduled between its check and its steal; the waiter
// descheduled before it queued). Also the reader: a written trace reads back
// to the same verdicts, and a file that is not a trace is refused.
#include "vmm/trace/bound_check.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>

#include "locks/lock_events.h"
#include "locks/pvbounded_tuning.h"
#include "vmm/trace/trace.h"
#include "vmm/trace/trace_reader.h"
#include "vmm/trace/trace_writer.h"
#include "tests/trace/sample_trace.h"
#include "vmm/util/error.h"

namespace lockvisor::trace {
namespace {

using locks::AcqPath;
constexpr std::uint64_t kUs = 1000, kMs = 1000 * kUs;

struct Builder {
  TraceTimeline t;
  explicit Builder(unsigned vcpus, std::uint64_t end = 20 * kMs) {
    t.vcpus = vcpus;
    t.vcpu.resize(vcpus);
    t.end_ns = end;
    t.metadata = {{"vcpus", vcpus}, {"args", "lock=pvbounded cs=100"}, {"backend", "userspace"}};
    for (TracedVcpu& v : t.vcpu) v.guest.push_back({0, end});  // running unless told otherwise
  }
  Builder& acq(unsigned vcpu, std::uint64_t arrive, std::uint64_t acquired, AcqPath path) {
    t.acquisitions.push_back({vcpu, 0, arrive, acquired, acquired + 100, static_cast<std::uint8_t>(path)});
    return *this;
  }
  Builder& preempted(unsigned vcpu, std::uint64_t begin, std::uint64_t end) {
    t.vcpu[vcpu].preempted.push_back({begin, end});
    return *this;
  }
  // A halt is inside a hypercall exit, outside KVM_RUN: split the guest span.
  Builder& halted(unsigned vcpu, std::uint64_t begin, std::uint64_t end) {
    TracedVcpu& v = t.vcpu[vcpu];
    const Span g = v.guest.back();
    v.guest.back().end_ns = begin - 1 * kUs;
    v.exits.push_back({begin - 1 * kUs, end + 1 * kUs});
    v.halted.push_back({begin, end});
    v.guest.push_back({end + 1 * kUs, g.end_ns});
    return *this;
  }
};

BoundRules rules() {
  BoundRules r;
  r.bound_ns = 1 * kMs;
  return r;
}

// The reasons of the bypasses of the first long wait.
std::vector<Reason> reasons(const BoundReport& r) {
  std::vector<Reason> out;
  if (!r.long_waits.empty())
    for (const Bypass& b : r.long_waits[0].bypasses) out.push_back(b.reason);
  return out;
}

TEST(BoundCheck, AStealPastARunningHeadOlderThanTIsAViolation) {
  // vCPU 0 waits 5 ms, running (spinning as the queue head) all along; vCPU 1
  // steals twice after 1 ms: the head should have reserved the lock.
  Builder b(2);
  b.acq(0, 1 * kMs, 6 * kMs, AcqPath::reserved)
      .acq(1, 3 * kMs, 3 * kMs, AcqPath::steal)
      .acq(1, 4 * kMs, 4 * kMs, AcqPath::steal);
  const BoundReport r = check_bound(b.t, rules());
  ASSERT_EQ(r.long_waits.size(), 1u);
  EXPECT_TRUE(r.long_waits[0].checked);
  EXPECT_EQ(reasons(r), (std::vector<Reason>{Reason::kRule3, Reason::kRule3}));
  EXPECT_EQ(r.violations, 2u);
  EXPECT_EQ(r.waits_with_violation, 1u);
  EXPECT_EQ(r.long_waits[0].bypasses[0].head, 0);
  const std::string text = format_bound_report(b.t, r, 10);
  EXPECT_NE(text.find("violation rule-3 (vCPU 0)"), std::string::npos) << text;
  EXPECT_NE(text.find("result: 2 bypasses in 1 waits break the invariant"), std::string::npos) << text;
}

TEST(BoundCheck, YoungStealsAndOlderWaitersInQueueOrderAreAllowed) {
  Builder b(3);
  b.acq(2, 0, 5 * kMs, AcqPath::reserved)  // older than vCPU 0: ahead of it
      .acq(0, 1 * kMs, 6 * kMs, AcqPath::reserved)
      .acq(1, 1 * kMs + 200 * kUs, 1 * kMs + 300 * kUs, AcqPath::steal)  // vCPU 0 younger than T
      .acq(1, 1 * kMs + 900 * kUs, 1 * kMs + 995 * kUs, AcqPath::steal);
  const BoundReport r = check_bound(b.t, rules());
  ASSERT_EQ(r.long_waits.size(), 2u);  // vCPU 2's 5 ms wait too
  // vCPU 2's wait: vCPU 1 stole while vCPU 2 was the running head, old: a violation there.
  const LongWait* w0 = nullptr;
  for (const LongWait& w : r.long_waits)
    if (b.t.acquisitions[w.wait].vcpu == 0) w0 = &w;
  ASSERT_NE(w0, nullptr);
  ASSERT_EQ(w0->bypasses.size(), 3u);
  EXPECT_EQ(w0->bypasses[0].reason, Reason::kYoung);
  EXPECT_EQ(w0->bypasses[1].reason, Reason::kYoung);
  EXPECT_EQ(w0->bypasses[2].reason, Reason::kAhead);
}

TEST(BoundCheck, StealsPastADueHeadThatCannotRunAreViolations) {
  // The hole the reservation on the head's behalf closes: vCPU 0 queues and
  // halts (made head while halted: kicked at 2 ms, woken at 4 ms), due at
  // 2 ms; vCPU 1 steals while it is halted, just after it wakes, and later.
  // Each steal should have been a reservation (rule 3b): a violation.
  Builder b(3);
  b.acq(0, 1 * kMs, 6 * kMs, AcqPath::queue)
      .halted(0, 1 * kMs + 20 * kUs, 4 * kMs)
      .acq(1, 3 * kMs, 3 * kMs, AcqPath::steal)
      .acq(1, 4 * kMs + 20 * kUs, 4 * kMs + 20 * kUs, AcqPath::steal)
      .acq(1, 5 * kMs, 5 * kMs, AcqPath::steal);
  b.t.vcpu[0].kicked_ns.push_back(2 * kMs);
  const BoundReport r = check_bound(b.t, rules());
  EXPECT_EQ(reasons(r), (std::vector<Reason>{Reason::kRule3, Reason::kRule3, Reason::kRule3}));
  EXPECT_EQ(r.violations, 3u);
  EXPECT_EQ(r.long_waits[0].bypasses[0].kicked_ago_ns, 1 * kMs) << "how long the halted head's wake-up had been asked";

  // Descheduled by the host instead: the same.
  Builder p(2);
  p.acq(0, 1 * kMs, 6 * kMs, AcqPath::queue).preempted(0, 2 * kMs, 5 * kMs).acq(1, 3 * kMs, 3 * kMs, AcqPath::steal);
  const BoundReport rp = check_bound(p.t, rules());
  EXPECT_EQ(reasons(rp), (std::vector<Reason>{Reason::kRule3}));
  EXPECT_NE(format_bound_report(p.t, rp, 10).find("break the invariant"), std::string::npos);

  // A fast path (the word showed no queue) past a halted or descheduled
  // waiter stays a host event: it had not queued as the trace assumed.
  Builder f(2);
  f.acq(0, 1 * kMs, 6 * kMs, AcqPath::queue).preempted(0, 2 * kMs, 5 * kMs).acq(1, 3 * kMs, 3 * kMs, AcqPath::fast);
  const BoundReport rf = check_bound(f.t, rules());
  EXPECT_EQ(reasons(rf), (std::vector<Reason>{Reason::kHeadPreempted}));
  EXPECT_NE(format_bound_report(f.t, rf, 10).find("result: no bypass breaks the invariant"), std::string::npos);
}

TEST(BoundCheck, AHeadLateIntoItsSlowPathOrAStealerLateToItsStealIsExplained) {
  // vCPU 0 is descheduled 2 us after it arrives, maybe before its slow path
  // stamped t0, until 2 ms: its own clock may start then, due at ~3 ms.
  Builder b(2);
  b.acq(0, 1 * kMs, 6 * kMs, AcqPath::reserved)
      .preempted(0, 1 * kMs + 2 * kUs, 2 * kMs)
      .acq(1, 2 * kMs + 500 * kUs, 2 * kMs + 500 * kUs, AcqPath::steal)  // W is 1.5 ms old, its t0 0.5 ms
      .acq(1, 3 * kMs + 500 * kUs, 3 * kMs + 500 * kUs, AcqPath::steal);  // now due
  EXPECT_EQ(reasons(check_bound(b.t, rules())), (std::vector<Reason>{Reason::kHeadNotDue, Reason::kRule3}));

  // vCPU 1 is descheduled from 2.9 ms to 3 ms and steals 5 us after it runs
  // again: it read the TSC before the break.  20 us after, no excuse.
  Builder s(2);
  s.acq(0, 1 * kMs, 6 * kMs, AcqPath::reserved)
      .preempted(1, 2 * kMs + 900 * kUs, 3 * kMs)
      .acq(1, 3 * kMs + 5 * kUs, 3 * kMs + 5 * kUs, AcqPath::steal)
      .acq(1, 3 * kMs + 20 * kUs, 3 * kMs + 20 * kUs, AcqPath::steal);
  EXPECT_EQ(reasons(check_bound(s.t, rules())), (std::vector<Reason>{Reason::kStealerLate, Reason::kRule3}));

  // vCPU 0 is descheduled in its steal phase (1.06 to 1.5 ms: after 60 us
  // of running, more than the arrival slack, so its t0 is its arrival); vCPU 2
  // arrives at 1.2 ms, queues first and heads the queue, young until 2.2 ms.
  // A steal at 2.1 ms bypasses vCPU 0 (2.1 ms old) legitimately; at 2.4 ms
  // vCPU 2 is due too.
  Builder q(3);
  q.acq(0, 1 * kMs, 6 * kMs, AcqPath::queue)
      .preempted(0, 1 * kMs + 60 * kUs, 1 * kMs + 500 * kUs)
      .halted(0, 1 * kMs + 520 * kUs, 5 * kMs)
      .acq(2, 1 * kMs + 200 * kUs, 5 * kMs + 500 * kUs, AcqPath::queue)
      .acq(1, 2 * kMs + 100 * kUs, 2 * kMs + 100 * kUs, AcqPath::steal)
      .acq(1, 2 * kMs + 400 * kUs, 2 * kMs + 400 * kUs, AcqPath::steal);
  // (vCPU 2's own acquisition, in queue order before vCPU 0's, is waiter-late too.)
  EXPECT_EQ(reasons(check_bound(q.t, rules())),
            (std::vector<Reason>{Reason::kWaiterLate, Reason::kRule3, Reason::kWaiterLate}));
}

// vCPU 0 waits from 1 ms to 6 ms and its wait ends on path `end`; meanwhile
// vCPU 1 takes the lock on the fast path (at 3 ms) and vCPU 2, arriving
// later, is served in queue order before it (at 4 ms). `preempted`: vCPU 0 is
// descheduled 5 us after it arrives, in its steal phase, until 5.9 ms.
BoundReport fast_path_and_queue_jump(AcqPath end, bool preempted) {
  Builder b(3);
  b.acq(0, 1 * kMs, 6 * kMs, end)
      .acq(1, 3 * kMs, 3 * kMs, AcqPath::fast)
      .acq(2, 3 * kMs + 500 * kUs, 4 * kMs, AcqPath::queue);
  if (preempted) b.preempted(0, 1 * kMs + 5 * kUs, 5 * kMs + 900 * kUs);
  return check_bound(b.t, rules());
}

TEST(BoundCheck, AWaiterDescheduledBeforeItQueuedExplainsFastPathsAndQueueJumps) {
  // Preempted before it queued: nobody is queued, both are explained.
  const BoundReport r = fast_path_and_queue_jump(AcqPath::queue, true);
  EXPECT_EQ(reasons(r), (std::vector<Reason>{Reason::kWaiterLate, Reason::kWaiterLate}));
  EXPECT_EQ(r.violations, 0u);
  // Running (so queued once past its steal phase): both break a rule.
  const BoundReport rv = fast_path_and_queue_jump(AcqPath::queue, false);
  EXPECT_EQ(reasons(rv), (std::vector<Reason>{Reason::kRule1, Reason::kRule2}));
  EXPECT_EQ(rv.violations, 2u);
}

TEST(BoundCheck, AWaitThatEndedInItsStealPhaseNeverQueuedWhateverItsRunningTime) {
  // vCPU 0 "runs" 5 ms (as a vCPU that an emulator's round-robin did not run
  // looks to the trace) and takes the lock in its steal phase: it never
  // queued, so the fast path and the queue jump past it break no rule.
  const BoundReport r = fast_path_and_queue_jump(AcqPath::spin, false);
  EXPECT_EQ(reasons(r), (std::vector<Reason>{Reason::kWaiterLate, Reason::kNotQueued}));
  EXPECT_EQ(r.violations, 0u);
  for (const AcqPath end : {AcqPath::steal, AcqPath::borrow, AcqPath::fast})
    EXPECT_EQ(fast_path_and_queue_jump(end, false).violations, 0u) << static_cast<int>(end);
}

TEST(BoundCheck, ABorrowNeedsLendingOnAndAPreemptedHead) {
  Builder b(2);
  b.acq(0, 1 * kMs, 6 * kMs, AcqPath::reserved)
      .preempted(0, 2 * kMs, 5 * kMs)
      .acq(1, 3 * kMs, 3 * kMs, AcqPath::borrow);
  EXPECT_EQ(reasons(check_bound(b.t, rules())), (std::vector<Reason>{Reason::kRule4})) << "lending is off";
  BoundRules lending = rules();
  lending.lending = true;
  EXPECT_EQ(reasons(check_bound(b.t, lending)), (std::vector<Reason>{Reason::kLent}));
  Builder running(2);
  running.acq(0, 1 * kMs, 6 * kMs, AcqPath::reserved).acq(1, 3 * kMs, 3 * kMs, AcqPath::borrow);
  EXPECT_EQ(reasons(check_bound(running.t, lending)), (std::vector<Reason>{Reason::kRule4})) << "the head could run";
}

TEST(BoundCheck, WaitsTheTraceCannotFullyShowAreNotCheckedAndUnknownsAreNotViolations) {
  Builder b(2);
  b.acq(0, 1 * kMs, 6 * kMs, AcqPath::reserved).acq(1, 3 * kMs, 3 * kMs, AcqPath::steal);
  b.t.vcpu[1].lock_lane_until = 4 * kMs;  // vCPU 1's log was full from 4 ms on
  BoundReport r = check_bound(b.t, rules());
  ASSERT_EQ(r.long_waits.size(), 1u);
  EXPECT_FALSE(r.long_waits[0].checked);
  EXPECT_EQ(r.violations, 0u) << "an unchecked wait's bypasses are not judged as complete";
  // The result line does not read as a pass over a wait nobody judged.
  EXPECT_NE(format_bound_report(b.t, r, 10).find("result: no bypass breaks the invariant in the 0 checked waits; 1 "
                                                 "of the 1 wait longer than T was not checked"),
            std::string::npos);

  Builder w(2);
  w.acq(0, 1 * kMs, 6 * kMs, AcqPath::reserved).acq(1, 3 * kMs, 3 * kMs, AcqPath::steal);
  w.t.begin_ns = 2 * kMs;  // a window that starts inside the wait
  w.t.windowed = true;
  EXPECT_FALSE(check_bound(w.t, rules()).long_waits[0].checked);

  Builder u(2);
  u.acq(0, 1 * kMs, 6 * kMs, AcqPath::reserved).acq(1, 3 * kMs, 3 * kMs, AcqPath::steal);
  u.t.acquisitions[1].path = kInvalidPath;
  u.t.vcpu[0].vcpu_lane_until = 2 * kMs;
  u.acq(1, 4 * kMs, 4 * kMs, AcqPath::steal);
  r = check_bound(u.t, rules());
  EXPECT_EQ(reasons(r), (std::vector<Reason>{Reason::kUnknownPath, Reason::kUnknownState}));
  EXPECT_EQ(r.violations, 0u);
}

// A report says when its guest timestamps cannot be placed against host
// events to the microseconds the rules compare; a precise clock adds nothing.
TEST(BoundCheck, AnImpreciseGuestClockIsNamedInTheNotes) {
  const auto clock_notes = [](const nlohmann::json& tsc, std::uint64_t clamped) {
    Builder b(2);
    b.acq(0, 1 * kMs, 6 * kMs, AcqPath::reserved).acq(1, 3 * kMs, 3 * kMs, AcqPath::steal);
    b.t.metadata["guest_tsc"] = tsc;
    b.t.metadata["locks"] = {{"clamped", clamped}};
    std::vector<std::string> out;
    for (const std::string& n : check_bound(b.t, rules()).notes)
      if (n.find("guest timestamps") != std::string::npos) out.push_back(n);
    return out;
  };
  EXPECT_TRUE(clock_notes({{"error_ns", 15.0}, {"offset_moved_ns", 0.0}}, 0).empty());
  const auto moved = clock_notes({{"error_ns", 132'492'791.0}, {"offset_moved_ns", 132'492'325.0}}, 125);
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_NE(moved[0].find("+-132492.8 us"), std::string::npos) << moved[0];
  EXPECT_NE(moved[0].find("125 lock records"), std::string::npos) << moved[0];
  const auto unknown = clock_notes({{"error_ns", nullptr}}, 0);
  ASSERT_EQ(unknown.size(), 1u);
  EXPECT_NE(unknown[0].find("no known error"), std::string::npos) << unknown[0];
}

// A guest clock good only to more than the grace (the nested machine's
// moves by milliseconds) cannot order the times a rule compares: what would
// be a violation is clock-unsure, an unknown, and the text names the rule.
// A clock as good as PVM's (15 ns) decides as before.
TEST(BoundCheck, AViolationAGuestClockCannotOrderIsClockUnsure) {
  Builder b(2);
  b.acq(0, 1 * kMs, 6 * kMs, AcqPath::reserved)
      .acq(1, 3 * kMs, 3 * kMs, AcqPath::steal)
      .acq(1, 4 * kMs, 4 * kMs, AcqPath::steal);
  b.t.metadata["guest_tsc"] = {{"error_ns", 2.5e6}, {"offset_moved_ns", 2.5e6}};
  const BoundRules from_file = bound_rules_from(b.t.metadata);
  EXPECT_EQ(from_file.clock_error_ns, 2500 * kUs);
  BoundRules r = rules();
  r.clock_error_ns = from_file.clock_error_ns;
  const BoundReport unsure = check_bound(b.t, r);
  EXPECT_EQ(reasons(unsure), (std::vector<Reason>{Reason::kClockUnsure, Reason::kClockUnsure}));
  EXPECT_EQ(unsure.long_waits[0].bypasses[0].would_be, Reason::kRule3);
  EXPECT_EQ(unsure.violations, 0u);
  const std::string text = format_bound_report(b.t, unsure, 10);
  EXPECT_NE(text.find("unknown clock-unsure (would be rule-3) (vCPU 0)"), std::string::npos) << text;
  EXPECT_NE(text.find("result: no bypass is shown to break the invariant; 2 would by this trace's guest clock"),
            std::string::npos)
      << text;
  r.clock_error_ns = 15;
  EXPECT_EQ(check_bound(b.t, r).violations, 2u) << "a 15 ns clock decides";
  // Allowed and explained bypasses stay what they are.
  Builder young(2);
  young.acq(0, 1 * kMs, 1500 * kUs, AcqPath::reserved).acq(1, 1200 * kUs, 1200 * kUs, AcqPath::steal);
  r.clock_error_ns = 2500 * kUs;
  r.bound_ns = 200 * kUs;
  EXPECT_EQ(reasons(check_bound(young.t, r)), (std::vector<Reason>{Reason::kYoung}));
}

TEST(BoundCheck, RulesComeFromTheRunsArguments) {
  BoundRules r = bound_rules_from(
      {{"args", "pvb_bound_us=2500 pvb_handoff=running pvb_head_us=30 pvb_stale_us=300 lock=pvbounded"},
       {"backend", "userspace"}});
  EXPECT_EQ(r.bound_ns, locks::pvb::kDefaultBoundMaxUs * kUs) << "judged against the adaptive bound's ceiling";
  EXPECT_EQ(r.aim_ns, 2500 * kUs);
  EXPECT_EQ(r.head_ns, 30 * kUs);
  EXPECT_EQ(r.resume_ns, 300 * kUs) << "a head silent for less than pvb_stale_us may be running";
  EXPECT_TRUE(r.lending);
  EXPECT_TRUE(r.judged);
  EXPECT_TRUE(r.halts_visible);
  r = bound_rules_from({{"args", "pvb_bound_us=junk lock=tas"}, {"backend", "kvm"}});
  EXPECT_EQ(r.bound_ns, locks::pvb::kDefaultBoundMaxUs * kUs) << "the lock's default T_max";
  EXPECT_EQ(r.aim_ns, locks::pvb::kDefaultBoundUs * kUs) << "the lock's default T";
  EXPECT_EQ(r.resume_ns, 100 * kUs);
  EXPECT_FALSE(r.judged);
  EXPECT_FALSE(r.halts_visible);
  r = bound_rules_from({{"args", "pvb_bound_us=2500 pvb_bound_max_us=1 lock=pvbounded"}});
  EXPECT_EQ(r.bound_ns, 2500 * kUs) << "T_max below T: a fixed bound, judged against T";
  EXPECT_EQ(r.aim_ns, 2500 * kUs);
  r = bound_rules_from({{"args", "pvb_bound_us=2500 pvb_bound_max_us=40000 lock=pvbounded"}});
  EXPECT_EQ(r.bound_ns, 40000 * kUs);
  // A key given twice (two --param): the guest takes the first, so does the oracle.
  r = bound_rules_from({{"args", "pvb_bound_us=2500 pvb_bound_max_us=1 pvb_bound_us=9000 lock=pvbounded"}});
  EXPECT_EQ(r.bound_ns, 2500 * kUs);

  Builder b(2);
  b.t.metadata["args"] = "lock=tas pvb_bound_max_us=1";
  b.acq(0, 1 * kMs, 6 * kMs, AcqPath::spin).acq(1, 3 * kMs, 3 * kMs, AcqPath::spin);
  const BoundReport nr = check_bound(b.t, bound_rules_from(b.t.metadata));
  EXPECT_EQ(reasons(nr), (std::vector<Reason>{Reason::kNotJudged}));
  EXPECT_EQ(nr.violations, 0u);
}

// Through the file: the writer's JSON read back gives the same verdicts.
TEST(TraceReader, AWrittenTraceReadsBackToTheSameVerdicts) {
  std::istringstream in(sample_trace_json("lock=pvbounded pvb_bound_max_us=1"));  // a fixed T: 1 ms
  const TraceTimeline t = read_trace_json(in, "t.json");
  ASSERT_EQ(t.vcpus, 2u);
  ASSERT_EQ(t.acquisitions.size(), 3u);
  EXPECT_EQ(t.acquisitions[0].arrive_ns, 1 * kMs);
  EXPECT_EQ(t.acquisitions[0].released_ns, 6 * kMs + 100);
  EXPECT_EQ(t.acquisitions[0].path, static_cast<std::uint8_t>(AcqPath::reserved));
  const BoundReport r = check_bound(t, bound_rules_from(t.metadata));
  EXPECT_EQ(reasons(r), (std::vector<Reason>{Reason::kRule3, Reason::kHeadPreempted}));
  // With the adaptive bound (the default T_max, above 5 ms) a 5 ms wait is within
  // what the lock guarantees: nothing to judge.
  TraceTimeline adaptive = t;
  adaptive.metadata["args"] = "lock=pvbounded";
  const BoundReport ra = check_bound(adaptive, bound_rules_from(adaptive.metadata));
  EXPECT_TRUE(ra.long_waits.empty());
  EXPECT_EQ(ra.violations, 0u);
}

TEST(TraceReader, WhatIsNotALockvisorTraceIsAUsageError) {
  for (const char* text :
       {"", "not json", "[1,2]", R"({"traceEvents":[]})",
        R"({"traceEvents":[{"ph":"X","tid":5000,"ts":1,"dur":1}],"metadata":{"vcpus":1}})",
        R"({"traceEvents":[{"ph":"X","tid":0,"ts":"x","dur":1}],"metadata":{"vcpus":1}})",
        R"({"traceEvents":[{"ph":"X","tid":3,"ts":1,"dur":1,"name":"guest"}],"metadata":{"vcpus":2}})",
        R"({"traceEvents":[],"metadata":{"vcpus":0}})"}) {
    std::istringstream in(text);
    try {
      read_trace_json(in, "bad.json");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUsage);
      EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace lockvisor::trace
