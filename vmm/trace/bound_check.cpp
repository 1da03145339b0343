// The bound oracle's judgement (bound_check.h has the rules): an index of
// when each vCPU ran guest code, then the checker that walks every wait
// longer than T and judges each acquisition that bypassed it. One file (over
// 500 lines): the rules are one decision, taken in the order the header
// gives, and each step asks the same per-vCPU index (running, halted,
// resumed, kicked), so the index and its only reader stay together.
#include "vmm/trace/bound_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "locks/lock_events.h"
#include "locks/pvbounded_tuning.h"
#include "vmm/trace/trace_buffer.h"

namespace lockvisor::trace {
namespace {
// Above this conversion error (guest TSC to the trace clock) the report says
// so: the rules compare lock and host events at microseconds (the head's
// resume allowance is tens of them), and a hardware or PVM host's error is
// tens of nanoseconds.
constexpr double kClockNoteNs = 1000;

using locks::AcqPath;

struct ReasonRow {
  const char* name;
  Verdict verdict;
  const char* text;
};
constexpr ReasonRow kReasons[] = {
    {"young", Verdict::kAllowed, "the waiter was younger than T: anyone may steal while N is clear (rule 1)"},
    {"ahead", Verdict::kAllowed, "a queue acquisition by an older waiter (the bound: waiters ahead arrived earlier)"},
    {"not-queued", Verdict::kAllowed, "the waiter had not joined the queue yet (its steal phase, rule 1)"},
    {"head-competes", Verdict::kAllowed, "a new head competes for T_head before it reserves (rule 3, pvb_head_us)"},
    {"lent", Verdict::kAllowed, "borrowed while the presumed head's vCPU was off its CPU (rule 4, handoff=running)"},
    {"head-preempted", Verdict::kExplained,
     "fast/spin (the word showed no queue): the presumed head was descheduled by the host, not yet queued"},
    {"head-halted", Verdict::kExplained,
     "fast/spin (the word showed no queue): the presumed head was halted, awaiting its wake-up"},
    {"head-exit", Verdict::kExplained, "fast/spin: the presumed head was in the VMM (an exit, outside KVM_RUN)"},
    {"head-parked", Verdict::kExplained,
     "fast/spin: the presumed head was held out of the guest by the VMM (injector, control socket)"},
    {"head-resuming", Verdict::kExplained,
     "fast/spin: the presumed head ran again for less than the resume time (its return from a halt or exit)"},
    {"waiter-late", Verdict::kExplained,
     "the waiter (or the presumed head) was off its CPU before it queued: later arrivals queued first"},
    {"head-not-due", Verdict::kExplained,
     "the presumed head was not yet due by its own t0, taken in the slow path: after a break right after its "
     "arrival, or a guest interrupt (stamp slack)"},
    {"stealer-late", Verdict::kExplained,
     "the stealer ran again less than the grace before it stole: it checked the head's due time before it was "
     "descheduled"},
    {"rule-1", Verdict::kViolation,
     "fast/spin path (nobody queued) while an older waiter had run past its steal phase: it must have queued"},
    {"rule-2", Verdict::kViolation, "a later arrival was served in queue order before a waiter already queued (FIFO)"},
    {"rule-3", Verdict::kViolation,
     "stolen past a queue head older than T: it was due, so N should have been set (by the head if it ran, by the "
     "stealer on its behalf if not, rule 3b)"},
    {"rule-4", Verdict::kViolation, "borrowed although lending is off or the presumed head could run"},
    {"clock-unsure", Verdict::kUnknown,
     "would break the rule named beside it, but the guest clock is good only to more than the grace here "
     "(metadata.guest_tsc.error_ns): its guest and host times cannot be ordered"},
    {"state-unknown", Verdict::kUnknown, "the trace does not know the presumed head's state then (a full lane)"},
    {"path-unknown", Verdict::kUnknown, "the acquisition's path is not one this lockvisor knows"},
    {"not-judged", Verdict::kUnknown, "not a pvbounded run: there is no bound to judge"},
};
static_assert(std::size(kReasons) == static_cast<unsigned>(Reason::kCount));

bool queue_path(std::uint8_t p) {
  return p == static_cast<std::uint8_t>(AcqPath::queue) || p == static_cast<std::uint8_t>(AcqPath::reserved);
}

// A wait that ended on a path of the steal phase (fast, spin, steal, borrow)
// never joined the queue: an MCS node cannot leave it, so a queued waiter
// is acquired as the head. Whatever its running time says (a vCPU the trace
// shows running may not have been, as under an emulator's round-robin), it
// was not the head anyone bypassed.
bool never_queued(std::uint8_t p) { return p < locks::kAcqPathCount && !queue_path(p); }

// Sorted by begin, overlapping or touching spans joined.
std::vector<Span> merge_spans(std::vector<Span> spans) {
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin_ns < b.begin_ns; });
  std::vector<Span> out;
  for (const Span& s : spans) {
    if (!out.empty() && s.begin_ns <= out.back().end_ns) {
      out.back().end_ns = std::max(out.back().end_ns, s.end_ns);
    } else {
      out.push_back(s);
    }
  }
  return out;
}

// Per vCPU: when it ran guest code (KVM_RUN minus host preemptions), as
// disjoint sorted spans with running totals for range sums.
struct VcpuIndex {
  const TracedVcpu* v = nullptr;
  std::vector<Span> running;
  std::vector<std::uint64_t> before;  // before[i]: running time in spans [0, i)
  std::uint64_t known_from = 0;       // earlier than this the file says nothing (counted as running)

  static bool contains(const std::vector<Span>& spans, std::uint64_t t) {
    auto it =
        std::upper_bound(spans.begin(), spans.end(), t, [](std::uint64_t x, const Span& s) { return x < s.begin_ns; });
    if (it == spans.begin()) return false;
    return t <= std::prev(it)->end_ns;
  }
  // Time of `spans` (sorted, disjoint) inside [a, b].
  static std::uint64_t overlap(const std::vector<Span>& spans, std::uint64_t a, std::uint64_t b) {
    std::uint64_t sum = 0;
    auto it =
        std::upper_bound(spans.begin(), spans.end(), a, [](std::uint64_t x, const Span& s) { return x < s.end_ns; });
    for (; it != spans.end() && it->begin_ns < b; ++it) sum += std::min(b, it->end_ns) - std::max(a, it->begin_ns);
    return sum;
  }

  std::uint64_t running_time(std::uint64_t a, std::uint64_t b) const {
    if (b <= a) return 0;
    std::uint64_t sum = a < known_from ? std::min(b, known_from) - a : 0;
    a = std::max(a, known_from);
    if (b <= a) return sum;
    // Whole spans between the first and last partial ones, by the totals.
    auto lo = std::upper_bound(running.begin(), running.end(), a,
                               [](std::uint64_t x, const Span& s) { return x < s.end_ns; });
    auto hi = std::lower_bound(running.begin(), running.end(), b,
                               [](const Span& s, std::uint64_t x) { return s.begin_ns < x; });
    if (lo >= hi) return sum;
    const auto i = static_cast<std::size_t>(lo - running.begin()), j = static_cast<std::size_t>(hi - running.begin());
    sum += before[j] - before[i];
    if (lo->begin_ns < a) sum -= a - lo->begin_ns;
    const Span& last = running[j - 1];
    if (last.end_ns > b) sum -= last.end_ns - b;
    return sum;
  }

  bool running_at(std::uint64_t t) const { return contains(running, t); }
  // Only a queued pvbounded waiter halts (a node, or a head holding N): a
  // halt that began since its arrival means it had left its steal phase.
  bool halted_since(std::uint64_t arrive, std::uint64_t t) const {
    auto it = std::lower_bound(v->halted.begin(), v->halted.end(), arrive,
                               [](const Span& s, std::uint64_t x) { return s.begin_ns < x; });
    return it != v->halted.end() && it->begin_ns <= t;
  }
  // The start of the running span that holds t (running_at(t) must be true).
  std::uint64_t resumed_at(std::uint64_t t) const {
    auto it = std::upper_bound(running.begin(), running.end(), t,
                               [](std::uint64_t x, const Span& s) { return x < s.begin_ns; });
    return std::prev(it)->begin_ns;
  }
  bool known_at(std::uint64_t t) const { return !v->vcpu_lane_until || t <= *v->vcpu_lane_until; }
  // The start of its first halt at or after `a` (~0: none).
  std::uint64_t first_halt_from(std::uint64_t a) const {
    auto it = std::lower_bound(v->halted.begin(), v->halted.end(), a,
                               [](const Span& s, std::uint64_t x) { return s.begin_ns < x; });
    return it == v->halted.end() ? ~std::uint64_t{0} : it->begin_ns;
  }
  // The latest time the lock's t0 of a wait that arrived at `a` can have:
  // the slow path stamps it a few instructions after the arrival, but the
  // trace counts as running the host's own work inside KVM_RUN (interrupts
  // taken without an exit to the VMM, the switch-out path before a
  // preemption), so a break within the first `slack` of running, before
  // the first halt (which comes after queueing), may precede the stamp.
  std::uint64_t t0_latest(std::uint64_t a, std::uint64_t slack) const {
    const std::uint64_t limit = std::min(first_halt_from(a), ran_by(a, slack));
    if (limit == ~std::uint64_t{0}) return limit;
    auto it = std::upper_bound(running.begin(), running.end(), limit,
                               [](std::uint64_t x, const Span& s) { return x < s.begin_ns; });
    if (it == running.begin()) return a;
    return std::max(a, std::prev(it)->begin_ns);
  }
  // The earliest time by which it had run `d` of guest time since `a`
  // (~0: never in the trace).
  std::uint64_t ran_by(std::uint64_t a, std::uint64_t d) const {
    auto it = std::upper_bound(running.begin(), running.end(), a,
                               [](std::uint64_t x, const Span& s) { return x < s.end_ns; });
    for (; it != running.end(); ++it) {
      const std::uint64_t from = std::max(a, it->begin_ns), len = it->end_ns - from;
      if (len >= d) return from + d;
      d -= len;
    }
    return ~std::uint64_t{0};
  }
  // Why it was not running guest code at t.
  Reason off_cpu_reason(std::uint64_t t) const {
    if (contains(v->preempted, t)) return Reason::kHeadPreempted;
    if (contains(v->halted, t)) return Reason::kHeadHalted;
    if (contains(v->parked, t)) return Reason::kHeadParked;
    return Reason::kHeadExit;  // an exit, or between KVM_RUNs
  }
};

VcpuIndex index_vcpu(const TracedVcpu& v, std::uint64_t coverage_begin) {
  VcpuIndex x;
  x.v = &v;
  // KVM_RUN minus every time the trace shows it off guest code: host
  // preemptions, and (should a lane show them overlapping) halts, exits and
  // parks.
  std::vector<Span> off = v.preempted;
  for (const auto* spans : {&v.halted, &v.exits, &v.parked}) off.insert(off.end(), spans->begin(), spans->end());
  off = merge_spans(std::move(off));
  std::size_t p = 0;
  for (const Span& g : merge_spans(v.guest)) {
    std::uint64_t at = g.begin_ns;
    while (p < off.size() && off[p].end_ns <= at) ++p;
    for (std::size_t q = p; q < off.size() && off[q].begin_ns < g.end_ns; ++q) {
      if (off[q].begin_ns > at) x.running.push_back({at, off[q].begin_ns});
      at = std::max(at, off[q].end_ns);
    }
    if (at < g.end_ns) x.running.push_back({at, g.end_ns});
  }
  // Touching spans (adjacent KVM_RUNs with nothing between) are one.
  std::vector<Span> merged = merge_spans(std::move(x.running));
  x.running = std::move(merged);
  x.before.assign(x.running.size() + 1, 0);
  for (std::size_t i = 0; i < x.running.size(); ++i)
    x.before[i + 1] = x.before[i] + (x.running[i].end_ns - x.running[i].begin_ns);
  x.known_from = coverage_begin;
  for (const auto* spans : {&v.guest, &v.preempted, &v.exits, &v.parked})
    if (!spans->empty()) x.known_from = std::min(x.known_from, spans->front().begin_ns);
  return x;
}

std::uint64_t union_overlap(std::vector<Span> spans, std::uint64_t a, std::uint64_t b) {
  return VcpuIndex::overlap(merge_spans(std::move(spans)), a, b);
}

class Checker {
 public:
  Checker(const TraceTimeline& t, const BoundRules& rules) : t_(t), rules_(rules) {
    for (const TracedVcpu& v : t.vcpu) vcpus_.push_back(index_vcpu(v, t.begin_ns));
    const auto& a = t.acquisitions;
    for (std::size_t i = 0; i < a.size(); ++i) {
      Lock& lock = locks_[a[i].lock];
      lock.by_acquired.push_back(i);
      if (a[i].arrive_ns) {
        if (lock.by_vcpu.size() <= a[i].vcpu) lock.by_vcpu.resize(a[i].vcpu + 1);
        lock.by_vcpu[a[i].vcpu].push_back(i);
      }
      if (queue_path(a[i].path)) lock.queue_acquired.push_back(a[i].acquired_ns);
    }
    for (auto& [slot, lock] : locks_) {
      std::sort(lock.by_acquired.begin(), lock.by_acquired.end(),
                [&](std::size_t x, std::size_t y) { return a[x].acquired_ns < a[y].acquired_ns; });
      for (auto& list : lock.by_vcpu)
        std::sort(list.begin(), list.end(),
                  [&](std::size_t x, std::size_t y) { return *a[x].arrive_ns < *a[y].arrive_ns; });
      std::sort(lock.queue_acquired.begin(), lock.queue_acquired.end());
    }
  }

  BoundReport run() {
    BoundReport r;
    r.rules = rules_;
    const auto& a = t_.acquisitions;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!a[i].arrive_ns) continue;
      ++r.waits;
      if (a[i].acquired_ns - *a[i].arrive_ns <= rules_.bound_ns) continue;
      r.long_waits.push_back(check_wait(i));
      const LongWait& w = r.long_waits.back();
      if (!w.checked) continue;
      std::uint64_t violations = 0;
      for (const Bypass& b : w.bypasses) {
        ++r.by_reason[static_cast<unsigned>(b.reason)];
        if (reason_verdict(b.reason) == Verdict::kViolation) ++violations;
        r.max_kicked_ago_ns = std::max(r.max_kicked_ago_ns, b.kicked_ago_ns);
      }
      r.violations += violations;
      if (violations != 0) ++r.waits_with_violation;
    }
    notes(r);
    return r;
  }

 private:
  struct Lock {
    std::vector<std::size_t> by_acquired;           // every acquisition of the lock, by acquired time
    std::vector<std::vector<std::size_t>> by_vcpu;  // per vCPU, by arrival (waits only)
    std::vector<std::uint64_t> queue_acquired;      // times of queue-path acquisitions (new heads)
  };

  LongWait check_wait(std::size_t wi) {
    const TracedAcquisition& w = t_.acquisitions[wi];
    const std::uint64_t arrive = *w.arrive_ns;
    LongWait out;
    out.wait = wi;
    const VcpuIndex& me = vcpus_[w.vcpu];
    out.running_ns = std::min(me.running_time(std::max(arrive, t_.begin_ns), w.acquired_ns), w.acquired_ns - arrive);
    out.preempted_ns = VcpuIndex::overlap(me.v->preempted, arrive, w.acquired_ns);
    out.halted_ns = union_overlap(me.v->halted, arrive, w.acquired_ns);
    if (arrive < t_.begin_ns || w.acquired_ns > t_.end_ns) {
      out.unchecked_why = "partly outside the trace's window";
    } else if (t_.merged_slices != 0) {
      out.unchecked_why = "acquisitions merged by --trace-merge-short";
    } else {
      for (unsigned u = 0; u < t_.vcpu.size(); ++u)
        if (t_.vcpu[u].lock_lane_until && *t_.vcpu[u].lock_lane_until < w.acquired_ns) {
          out.unchecked_why = fmt::format("vCPU {}'s lock lane is full before the wait ended", u);
          break;
        }
    }
    out.checked = out.unchecked_why.empty();
    const Lock& lock = locks_.at(w.lock);
    const auto& a = t_.acquisitions;
    auto it = std::upper_bound(lock.by_acquired.begin(), lock.by_acquired.end(), arrive,
                               [&](std::uint64_t x, std::size_t k) { return x < a[k].acquired_ns; });
    const auto held = [&](std::size_t k) {
      const TracedAcquisition& h = a[k];
      const std::uint64_t end = std::min(h.released_ns.value_or(h.acquired_ns), w.acquired_ns);
      const std::uint64_t begin = std::max(h.acquired_ns, arrive);
      if (h.vcpu != w.vcpu && end > begin) out.held_ns += end - begin;
    };
    if (it != lock.by_acquired.begin()) held(*std::prev(it));  // the hold W arrived into
    for (; it != lock.by_acquired.end() && a[*it].acquired_ns < w.acquired_ns; ++it) {
      if (a[*it].vcpu == w.vcpu) continue;
      held(*it);
      out.bypasses.push_back(judge(w, *it));
    }
    return out;
  }

  Bypass judge(const TracedAcquisition& w, std::size_t bi) {
    const TracedAcquisition& b = t_.acquisitions[bi];
    Bypass out;
    out.by = bi;
    const std::uint64_t t = b.acquired_ns, arrive = *w.arrive_ns;
    auto done = [&](Reason r, int head = -1) {
      if (reason_verdict(r) == Verdict::kViolation && rules_.clock_error_ns > rules_.grace_ns) {
        out.would_be = r;
        r = Reason::kClockUnsure;
      }
      out.reason = r;
      out.head = head;
      return out;
    };
    if (!rules_.judged) return done(Reason::kNotJudged);
    if (b.path >= locks::kAcqPathCount) return done(Reason::kUnknownPath);
    if (t - arrive < rules_.bound_ns + rules_.grace_ns) return done(Reason::kYoung);
    const VcpuIndex& wv = vcpus_[w.vcpu];
    if (queue_path(b.path)) {
      // B was ahead of W in the queue. Fine if it arrived first; else W had
      // not queued when B did, i.e. W's steal phase was not over by then.
      if (!b.arrive_ns || *b.arrive_ns <= arrive) return done(Reason::kAhead);
      if (never_queued(w.path)) return done(Reason::kNotQueued, static_cast<int>(w.vcpu));
      const std::uint64_t ran = wv.running_time(arrive, *b.arrive_ns);
      if (ran >= rules_.steal_phase_ns || wv.halted_since(arrive, *b.arrive_ns))
        return done(Reason::kRule2, static_cast<int>(w.vcpu));
      return done(ran + rules_.grace_ns < *b.arrive_ns - arrive ? Reason::kWaiterLate : Reason::kNotQueued,
                  static_cast<int>(w.vcpu));
    }
    // Borrow, steal, spin, fast: the presumed head must have been unable to
    // act (reserve; for a borrow, run). A waiter that ran less than the steal
    // phase since it arrived may not have queued yet: not necessarily the
    // head, so the next one is asked; if none decides, its being off its CPU
    // before it queued is the explanation.
    const Lock& lock = locks_.at(w.lock);
    const bool borrow = b.path == static_cast<std::uint8_t>(AcqPath::borrow);
    const bool steal = b.path == static_cast<std::uint8_t>(AcqPath::steal);
    std::optional<int> late;
    for (const Candidate& c : candidates(lock, b, arrive)) {
      const VcpuIndex& cv = vcpus_[c.vcpu];
      const int head = static_cast<int>(c.vcpu);
      if (!cv.known_at(t)) return done(Reason::kUnknownState, head);
      const bool queued = !never_queued(c.path) && (cv.halted_since(c.arrive, t) ||
                                                    cv.running_time(c.arrive, t) >= rules_.steal_phase_ns);
      // A steal past the queue (rule 3 and 3b): a due head gets N whether or
      // not it runs, so its state explains nothing here.
      if (steal && queued) {
        if (cv.off_cpu_reason(t) == Reason::kHeadHalted && !cv.running_at(t))
          out.kicked_ago_ns = kicked_ago(*cv.v, t);  // kept for the report: how long since its wake-up was asked
        return done(judge_steal(b, c, lock, t), head);
      }
      if (!cv.running_at(t)) {
        if (!queued) {
          if (!late) late = head;
          continue;
        }
        const Reason why = cv.off_cpu_reason(t);
        // Lending is for a head the host has descheduled, not a sleeping one.
        if (borrow) return done(rules_.lending && why == Reason::kHeadPreempted ? Reason::kLent : Reason::kRule4, head);
        if (why == Reason::kHeadHalted) out.kicked_ago_ns = kicked_ago(*cv.v, t);
        return done(why, head);
      }
      // Running guest code, as far as the trace sees: with --backend kvm a
      // halt happens inside KVM_RUN, so the trace cannot tell.
      if (!rules_.halts_visible) return done(Reason::kUnknownState, head);
      if (!queued) continue;
      if (t - cv.resumed_at(t) < rules_.resume_ns) return done(Reason::kHeadResuming, head);
      if (borrow) return done(Reason::kRule4, head);
      if (rules_.head_ns != 0 && since_new_head(lock, t) < rules_.head_ns + rules_.grace_ns)
        return done(Reason::kHeadCompetes, head);
      return done(Reason::kRule1, head);  // (a steal past a queued head was judged above)
    }
    return done(Reason::kWaiterLate, late.value_or(static_cast<int>(w.vcpu)));
  }

  struct Candidate {
    unsigned vcpu;
    std::uint64_t arrive;
    std::uint8_t path;  // how its wait ended
  };

  // A steal at t past presumed head c (queued, older than T by its arrival).
  Reason judge_steal(const TracedAcquisition& b, const Candidate& c, const Lock& lock, std::uint64_t t) const {
    if (rules_.head_ns != 0 && since_new_head(lock, t) < rules_.head_ns + rules_.grace_ns) return Reason::kHeadCompetes;
    // The lock's t0 is stamped in the slow path, a few instructions after the
    // arrival (t0_latest: unless a break came first).
    const VcpuIndex& cv = vcpus_[c.vcpu];
    const std::uint64_t t0 = cv.t0_latest(c.arrive, rules_.arrival_slack_ns);
    const std::uint64_t due_after = rules_.bound_ns + rules_.stamp_slack_ns + rules_.grace_ns;
    if (t0 == ~std::uint64_t{0} || t < t0 + due_after) return Reason::kHeadNotDue;
    // The queue is in queue order, not arrival order: if c was off its CPU
    // before it queued (by its first halt, or once it had run its steal
    // phase), a waiter that arrived meanwhile, even one younger than W, may
    // head the queue; the steal is judged against it if it is not yet due.
    const std::uint64_t queued_by = std::min(cv.first_halt_from(c.arrive), cv.ran_by(c.arrive, rules_.steal_phase_ns));
    if (queued_by != ~std::uint64_t{0} && queued_by - c.arrive > cv.running_time(c.arrive, queued_by) + rules_.grace_ns)
      for (const Candidate& x : candidates(lock, b, ~std::uint64_t{0})) {
        if (x.vcpu == c.vcpu || x.arrive >= queued_by) continue;
        const std::uint64_t x0 = vcpus_[x.vcpu].t0_latest(x.arrive, rules_.arrival_slack_ns);
        if (x0 == ~std::uint64_t{0} || t < x0 + due_after) return Reason::kWaiterLate;
      }
    // The stealer's due-time check and its cmpxchg (and the trace's time
    // stamp after it) are a few instructions apart: a break between them
    // makes the check older than the steal.
    const VcpuIndex& bv = vcpus_[b.vcpu];
    if (!bv.running_at(t) || t - bv.resumed_at(t) < rules_.grace_ns) return Reason::kStealerLate;
    return Reason::kRule3;
  }
  // The lock's waiters at t other than B's vCPU that arrived no later than
  // W, oldest first (W among them).
  std::vector<Candidate> candidates(const Lock& lock, const TracedAcquisition& b, std::uint64_t w_arrive) const {
    const auto& a = t_.acquisitions;
    const std::uint64_t t = b.acquired_ns;
    std::vector<Candidate> out;
    for (unsigned v = 0; v < lock.by_vcpu.size(); ++v) {
      if (v == b.vcpu) continue;
      const auto& list = lock.by_vcpu[v];
      auto it = std::upper_bound(list.begin(), list.end(), t,
                                 [&](std::uint64_t x, std::size_t k) { return x < *a[k].arrive_ns; });
      if (it == list.begin()) continue;
      const TracedAcquisition& c = a[*std::prev(it)];
      if (c.acquired_ns > t && *c.arrive_ns <= w_arrive) out.push_back({v, *c.arrive_ns, c.path});
    }
    std::sort(out.begin(), out.end(), [](const Candidate& x, const Candidate& y) { return x.arrive < y.arrive; });
    return out;
  }

  // Since the latest queue-path acquisition of the lock before t: the owner
  // that took it made its successor head right after.
  static std::uint64_t since_new_head(const Lock& lock, std::uint64_t t) {
    auto it = std::lower_bound(lock.queue_acquired.begin(), lock.queue_acquired.end(), t);
    return it == lock.queue_acquired.begin() ? ~std::uint64_t{0} : t - *std::prev(it);
  }

  // A halted vCPU: how long before t the latest kick to it was sent within
  // its current halt (0: none, it was not yet kicked).
  static std::uint64_t kicked_ago(const TracedVcpu& v, std::uint64_t t) {
    auto h = std::upper_bound(v.halted.begin(), v.halted.end(), t,
                              [](std::uint64_t x, const Span& s) { return x < s.begin_ns; });
    if (h == v.halted.begin()) return 0;
    const std::uint64_t since = std::prev(h)->begin_ns;
    std::uint64_t latest = 0;
    bool any = false;
    for (std::uint64_t k : v.kicked_ns)
      if (k >= since && k <= t && (!any || k > latest)) {
        latest = k;
        any = true;
      }
    return any ? std::max<std::uint64_t>(t - latest, 1) : 0;
  }

  void notes(BoundReport& r) const {
    const nlohmann::json& m = t_.metadata;
    const auto host = m.find("host_preemptions");
    if (host != m.end() && host->is_object()) {
      const std::string source = host->value("source", "");
      if (source.rfind("run-state program", 0) != 0)
        r.notes.push_back(fmt::format("host preemptions are not exact here ({}): a head's state can be wrong", source));
      const auto unseen = host->value("switches_unseen", std::uint64_t{0});
      if (unseen != 0)
        r.notes.push_back(
            fmt::format("{} host switches were not seen: a vCPU may be taken for running while descheduled", unseen));
    }
    if (!rules_.halts_visible)
      r.notes.push_back("halts are not visible with --backend kvm: a halted head looks running (state-unknown)");
    if (t_.windowed) r.notes.push_back("a windowed trace: only the waits inside the window are checked");
    // Lock events carry guest timestamps, host events host ones: the oracle
    // orders the two only as well as the conversion between them is known.
    const auto tsc = m.find("guest_tsc");
    if (tsc != m.end() && tsc->is_object()) {
      const auto error = tsc->find("error_ns");
      if (error != tsc->end() && error->is_null())
        r.notes.push_back("guest timestamps have no known error (KVM told neither the TSC offset nor IA32_TSC): a "
                          "lock event is placed against host events on an assumed offset of 0");
      if (error != tsc->end() && error->is_number() && error->get<double>() > kClockNoteNs) {
        std::string clamped;
        const nlohmann::json::json_pointer at("/locks/clamped");
        if (m.contains(at) && m[at].is_number_unsigned() && m[at].get<std::uint64_t>() != 0)
          clamped = fmt::format(" ({} lock records fell outside the run and were clamped into it)",
                                m[at].get<std::uint64_t>());
        r.notes.push_back(fmt::format(
            "guest timestamps are good to +-{:.1f} us here (metadata.guest_tsc: a vCPU's TSC offset moved during "
            "the run, or KVM's offset was read, not told){}: a lock event and a host event closer than that may be "
            "in the wrong order",
            error->get<double>() / 1000, clamped));
      }
    }
  }

  const TraceTimeline& t_;
  const BoundRules& rules_;
  std::vector<VcpuIndex> vcpus_;
  std::map<std::uint32_t, Lock> locks_;
};

}  // namespace

const char* verdict_name(Verdict v) {
  constexpr const char* kNames[kVerdicts] = {"allowed", "explained", "violation", "unknown"};
  return static_cast<unsigned>(v) < kVerdicts ? kNames[static_cast<unsigned>(v)] : "unknown";
}
const char* reason_name(Reason r) { return kReasons[static_cast<unsigned>(r)].name; }
const char* reason_text(Reason r) { return kReasons[static_cast<unsigned>(r)].text; }
Verdict reason_verdict(Reason r) { return kReasons[static_cast<unsigned>(r)].verdict; }

std::vector<std::pair<std::string, std::string>> run_args(const nlohmann::json& metadata) {
  std::vector<std::pair<std::string, std::string>> out;
  std::set<std::string_view> seen;
  const auto args = metadata.find("args");
  if (args == metadata.end() || !args->is_string()) return out;
  const std::string& text = args->get_ref<const std::string&>();
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = std::min(text.find(' ', at), text.size());
    const std::string_view word(text.data() + at, end - at);
    at = end + 1;
    const std::size_t eq = word.find('=');
    if (eq != std::string_view::npos && seen.insert(word.substr(0, eq)).second)
      out.emplace_back(word.substr(0, eq), word.substr(eq + 1));
  }
  return out;
}

BoundRules bound_rules_from(const nlohmann::json& metadata) {
  namespace pvb = locks::pvb;
  BoundRules rules;
  rules.bound_ns = pvb::kDefaultBoundUs * 1000;
  std::uint64_t max_ns = pvb::kDefaultBoundMaxUs * 1000;
  rules.head_ns = pvb::kDefaultHeadUs * 1000;
  rules.lending = false;  // pvb_handoff's default, head
  rules.resume_ns = pvb::kDefaultStaleUs * 1000;
  std::string lock;
  for (const auto& [key, value] : run_args(metadata)) {
    if (key == "lock") lock = value;
    const pvb::TuningKey* k = pvb::find_tuning_key(key.data(), key.size());
    locks::u64 n = 0;
    if (k == nullptr || pvb::check_tuning_value(*k, value.c_str(), &n) != pvb::TuningCheck::kValid) continue;
    if (k->field == &pvb::Tuning::bound_us) rules.bound_ns = n * 1000;
    if (k->field == &pvb::Tuning::bound_max_us) max_ns = n * 1000;
    if (k->field == &pvb::Tuning::head_us) rules.head_ns = n * 1000;
    if (k->field == &pvb::Tuning::handoff) rules.lending = n == pvb::kHandoffRunning;
    if (k->field == &pvb::Tuning::stale_us) rules.resume_ns = n * 1000;
  }
  rules.aim_ns = rules.bound_ns;
  rules.bound_ns = std::max(rules.bound_ns, max_ns);
  rules.judged = bound_judges(lock);
  rules.halts_visible = metadata.value("backend", "") != "kvm";
  const nlohmann::json::json_pointer error("/guest_tsc/error_ns");
  if (metadata.contains(error) && metadata[error].is_number() && metadata[error].get<double>() > 0)
    rules.clock_error_ns = static_cast<std::uint64_t>(metadata[error].get<double>());
  return rules;
}

bool bound_judges(std::string_view lock) { return lock == "pvbounded"; }

BoundReport check_bound(const TraceTimeline& t, const BoundRules& rules) { return Checker(t, rules).run(); }

}  // namespace lockvisor::trace
