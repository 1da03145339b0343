// The bound oracle (`lockvisor trace-check FILE`, docs/pvbounded.md): from a
// traced run, every lock wait longer than T, the acquisitions that bypassed
// it, and for each whether pvbounded's invariant (guest/locks/pvbounded.h)
// allows it, a host event explains it, or it breaks a named rule.
//
// A bypass of waiter W is an acquisition B of W's lock by another vCPU with
// W.arrive < B.acquired < W.acquired. At t = B.acquired, with W's age
// t - W.arrive, B is judged in this order:
//   young        age < T + grace: no waiter need have reserved yet (rule 1:
//                anyone may steal while N is clear).                allowed
//   queue order  B took a queue path (queue, reserved):
//                  ahead       B arrived no later than W (the bound: waiters
//                              ahead of W arrived earlier).          allowed
//                  not-queued  W had run less than the steal phase S by the
//                              time B arrived, without a break: W had not
//                              joined the queue when B did.         allowed
//                  waiter-late the same, with W off its CPU meanwhile: W was
//                              descheduled before it queued.      explained
//                  rule-2      otherwise: W was queued before B arrived, and
//                              the MCS queue is FIFO.             violation
//   borrow       lending must be on (pvb_handoff=running) and the presumed
//                head (below) off its CPU: lent (allowed), else rule-4.
//   steal, spin, fast (need N clear): the presumed head is the oldest
//                waiter of the lock at t (other than B's vCPU, no younger
//                than W) that has run for at least S since it arrived (a
//                waiter that ran less may still be in its steal phase, not
//                queued); by the header's bound argument it is the queue
//                head, older than T. (A waiter that halted since it arrived
//                has queued: only queued pvbounded waiters halt.)
//   steal        (a free lock with a queue) past a queued presumed head:
//                the head was due, and rule 3b sets N for a due head
//                whatever its state (the head itself, the owner that made
//                it head, or the stealer on its behalf), so:
//                  head-competes  T_head > 0 and a head took over less than
//                              T_head ago.                          allowed
//                  head-not-due   the head was off its CPU within the
//                              first arrival_slack of running after it
//                              arrived (before its first halt), and T had
//                              not passed since that break ended (the
//                              lock's t0 is taken in the slow path, maybe
//                              after the break).                 explained
//                  waiter-late    the head was off its CPU before it
//                              queued (by its first halt or S of running)
//                              and a waiter that arrived meanwhile, maybe
//                              younger than W, was not yet due: it may head
//                              the queue (queue order is not arrival
//                              order).                           explained
//                  stealer-late   B ran again less than `grace` before t
//                              (its check preceded a break).     explained
//                  rule-3      otherwise.                       violation
//   spin, fast, and a steal with no queued presumed head: the presumed head
//                must not have been able to queue or reserve:
//                  head-preempted / head-halted / head-exit / head-parked
//                              it was not running guest code at t: it could
//                              not set N (a host event).        explained
//                  head-resuming  it ran again for less than the resume
//                              time (its return from a halt or exit).
//                                                                 explained
//                  head-competes  T_head > 0 and a head took over less than
//                              T_head ago (it competes first).    allowed
//                  rule-1      it was running and had run past its
//                              steal phase: it had queued, so the word
//                              cannot have shown no queue.      violation
//                  waiter-late no such waiter: every older waiter (W too) ran
//                              less than S in all that time, i.e. was
//                              descheduled before it queued.     explained
// Verdict `unknown` when the trace cannot tell (a lane full at t, a path the
// VMM does not know, halts invisible with --backend kvm). A wait is checked
// only when the file holds all of it and every lock lane is complete until it
// ended (a window or a full lane could hide bypasses).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vmm/trace/trace_reader.h"

namespace lockvisor::trace {

// The rules' parameters: the lock's own (pvbounded_tuning.h), as the run set
// them, and the oracle's slack.
struct BoundRules {
  // The bound judged: T (pvb_bound_us), or T_max (pvb_bound_max_us) when
  // that is larger: the adaptive bound may work at any value in between, and
  // the lock's guarantee starts at the top of that range.
  std::uint64_t bound_ns = 0;
  std::uint64_t aim_ns = 0;        // T itself, for the report (== bound_ns: a fixed bound)
  std::uint64_t head_ns = 0;       // T_head (pvb_head_us)
  bool lending = false;            // pvb_handoff=running
  std::uint64_t grace_ns = 10000;  // a running head's reaction: one loop iteration and a critical section
  // How long a head that runs again takes to act: the return from its halt
  // or exit, guest CPL0 code that PVM emulates. Default: the lock's own
  // allowance for a silent running head, pvb_stale_us (100 us).
  std::uint64_t resume_ns = 100000;
  std::uint64_t steal_phase_ns = 100000;  // a newcomer's pvb_steal_spins take less running time (generous: contended reads)
  // A break (preemption, exit, park) within this much running time after an
  // arrival, before the waiter's first halt, may come before the lock
  // stamped the wait's t0: the trace counts the host's work inside KVM_RUN
  // (the interrupt and switch-out path before a preemption: 10 us seen on
  // PVM before the guest had stamped t0). The wait's t0 is then taken as the
  // end of that break. Small on purpose: a break later than this came after
  // the stamp, and steals after t0 + T past that head are violations.
  std::uint64_t arrival_slack_ns = 20000;
  // Without a visible break, the lock's t0 still follows the trace's arrival
  // stamp by whatever guest code ran between them: at most a guest interrupt
  // (its timer tick is CPL0 code, emulated on PVM: 10-20 us seen). A head is
  // taken as due only this long (plus grace) after T.
  std::uint64_t stamp_slack_ns = 30000;
  // What a guest timestamp can be off by on the trace's clock
  // (metadata.guest_tsc.error_ns). Beyond the grace, a bypass that would
  // break a rule is clock-unsure: the rules compare guest times (arrivals,
  // acquisitions) with host times (halts, preemptions, running time) and with
  // other vCPUs' guest times, and such a clock cannot order them (the nested
  // machine's moves by milliseconds; PVM's is 15 ns).
  std::uint64_t clock_error_ns = 0;
  bool judged = true;                    // false: not a pvbounded run (its bypasses are listed, not judged)
  bool halts_visible = true;             // false: --backend kvm (halts inside KVM_RUN look like running)
};

// The traced run's guest arguments (metadata.args: "key=value ..."), in
// order; words without '=' are left out, and a key given twice counts once,
// with its first value, as the guest reads it.
std::vector<std::pair<std::string, std::string>> run_args(const nlohmann::json& metadata);

// T and the other parameters as the traced run had them: its metadata.args
// ("pvb_bound_us=... lock=pvbounded ..."), the lock's defaults otherwise.
BoundRules bound_rules_from(const nlohmann::json& metadata);

// Whether the oracle judges runs of `lock` (a registry name): pvbounded's.
bool bound_judges(std::string_view lock);

enum class Verdict : std::uint8_t { kAllowed, kExplained, kViolation, kUnknown };
inline constexpr unsigned kVerdicts = 4;
const char* verdict_name(Verdict v);

// The reasons above, in one list (reason_name, reason_verdict).
enum class Reason : std::uint8_t {
  kYoung,
  kAhead,
  kNotQueued,
  kHeadCompetes,
  kLent,
  kHeadPreempted,
  kHeadHalted,
  kHeadExit,
  kHeadParked,
  kHeadResuming,
  kWaiterLate,
  kHeadNotDue,
  kStealerLate,
  kRule1,
  kRule2,
  kRule3,
  kRule4,
  kClockUnsure,
  kUnknownState,
  kUnknownPath,
  kNotJudged,
  kCount
};
const char* reason_name(Reason r);
const char* reason_text(Reason r);
Verdict reason_verdict(Reason r);

struct Bypass {
  std::size_t by = 0;  // TraceTimeline::acquisitions index
  Reason reason = Reason::kYoung;
  int head = -1;                    // the vCPU the rule needed (presumed head), -1 none
  Reason would_be = Reason::kCount;  // kClockUnsure: the rule it would break
  std::uint64_t kicked_ago_ns = 0;  // head halted and kicked: since the latest kick (0: not kicked)
};

struct LongWait {
  std::size_t wait = 0;  // TraceTimeline::acquisitions index
  bool checked = false;
  std::string unchecked_why;
  std::vector<Bypass> bypasses;  // in acquisition order
  // The waiter's own time during the wait: running guest code, preempted,
  // halted, other (exits, parks, unknown).
  std::uint64_t running_ns = 0, preempted_ns = 0, halted_ns = 0;
  // The lock held by others during the wait (holds are disjoint): the rest
  // of the wait it was free, e.g. reserved for a head waiting for a CPU.
  std::uint64_t held_ns = 0;
};

struct BoundReport {
  BoundRules rules;
  std::uint64_t waits = 0;  // every wait in the file
  std::vector<LongWait> long_waits;
  std::uint64_t violations = 0;  // bypasses judged a violation, over checked waits
  std::uint64_t waits_with_violation = 0;
  std::array<std::uint64_t, static_cast<unsigned>(Reason::kCount)> by_reason{};
  std::vector<std::string> notes;  // limits of this trace (estimated preemptions, unseen switches, ...)
  // Bypasses past a halted head that had been kicked (head-halted, and
  // rule-3 steals past a halted due head): the longest time since that kick
  // (the wake-up latency the lock was stealable for).
  std::uint64_t max_kicked_ago_ns = 0;
};

BoundReport check_bound(const TraceTimeline& t, const BoundRules& rules);

// One line per long wait (and, with `runs` > 0, up to that many lines per
// wait of consecutive bypasses with the same path, verdict and head), then a
// summary line.
std::string format_bound_report(const TraceTimeline& t, const BoundReport& r, std::size_t runs);

}  // namespace lockvisor::trace
