// workloads.h: the lock workloads, run by every taking-part CPU at once.
//
//   run_workload<Env, Lock, Platform>(params, shared, cpu, out)
//
// is called concurrently by each of the params.cpus CPUs (guest vCPUs or
// native host threads), with cpu = 0..params.cpus-1 equal to Env::cpu().
// `shared` is one zeroed WorkloadShared<Lock> for the whole run; `out` is
// this CPU's result record.  Call check_params() first (the guest and the
// native runner do): run_workload assumes valid parameters.
//
// WORKLOADS (abi::WorkloadKind)
//   lockbench    all CPUs, one lock (slot 0): t0 = now(); lock(); t1 = now();
//                critical section held until t1 + cs_ns; unlock(); busy
//                delay_ns; repeat.  The "spinlock micro-benchmark" of Waiman
//                Long's qspinlock series (LKML, March 2014): a lock/unlock loop
//                per task, standalone/embedded layouts.
//   uncontended  CPU 0 alone, `iterations` (default 256K) lock()/unlock()
//                pairs back to back, timed as a whole: elapsed_cycles /
//                ops = cycles per pair "including the looping and timing
//                overhead", like that series' uncontended table.  No per-pair
//                timestamps (an rdtsc pair costs about as much as the lock),
//                so latency_count is 0 here.  The other CPUs pass the start
//                barrier and return with ops = 0.
//   torture      locktorture-style: each acquisition picks one of nlocks
//                locks at random and holds it for a random 0..cs_ns; with
//                probability 1/long_hold_every it holds it for long_hold_ns
//                instead ("a long delay occasionally to force massive
//                contention", which also looks like lock-holder preemption).
//
// WHAT IS TIMED
//   * Acquisition latency: now() before lock() to now() after it, in
//     lock-clock ticks (TSC cycles on x86; platform.h), into
//     out.latency_buckets (abi::latency_bucket) with count, sum and max.
//     now() is a plain rdtsc (not serialising): the error is a few tens of
//     cycles, small next to contended acquisitions, and the same for every
//     lock.  The random draws of torture happen before t0.
//   * elapsed_cycles: from the common start (the start barrier's release
//     time) to this CPU's end of loop -- its finish time, whose spread over
//     CPUs is the fairness of a fixed-work (iterations) run; for
//     uncontended CPU 0, the timed loop.
//   * Short-window fairness: with p.fairness_window_ns != 0, out.window_ops[i]
//     counts the acquisitions whose lock() returned in [start + i*w,
//     start + (i+1)*w) (w = out.window_cycles; the first kFairnessWindows
//     windows).  One compare per acquisition against the next boundary.
//   * The window marks: Platform::window_mark(edge), when the Platform has
//     one, is called by every CPU after the start barrier (abi::kWindowStart)
//     and after its loop (abi::kWindowEnd): the guest exits to the VMM there,
//     which samples the vCPU thread's CPU time, run-queue wait and context
//     switches, so host-side costs cover the measured window only.
//   * Run length: iterations != 0 -> exactly that many acquisitions per CPU
//     (duration_ns ignored); iterations == 0 -> until the common deadline
//     start + duration_ns (an acquisition started before it completes).
//
// WHY BARRIERS
//   Start: vCPUs (and threads) come up at different times; without a
//   barrier the first CPU would run uncontended for a while.  The last CPU
//   to arrive stamps the start time and the deadline, so every CPU measures
//   the same window and stops at the same TSC value (the TSC is synchronised
//   across CPUs on the host and in KVM guests).  The start barrier's wait
//   spins with Platform::barrier_relax() (default `pause`) before the
//   window's start mark.  End: there is no wait.  Each CPU publishes its
//   acquisition totals and arrives; the LAST CPU to arrive checks the
//   counters and returns.  A CPU that has finished never spins while others
//   still run (it reports and stops), so it does not take CPU time from the
//   CPUs being measured when they share a host CPU.
//
// BUSY WORK (critical section and delay): spin on now() until the target
// time, WITHOUT `pause`.  It models useful work, not waiting: under KVM a
// `pause` loop triggers pause-loop exiting, which would deschedule lock
// holders (inside the critical section) and create the very lock-holder
// preemption we want to observe only when the host causes it.  The critical
// section lasts max(cs_ns, the cost of its own checks and writes): the hold
// target is counted from the acquisition time t1.
//
// WHAT A VIOLATION MEANS (out.violations; any non-zero value = the lock did
// not provide mutual exclusion; it counts failed checks, not overlaps):
//   * owner check: entering, xchg(owner, cpu+1) must return 0 (nobody else
//     inside); leaving, xchg(owner, 0) must return cpu+1 (nobody entered
//     meanwhile).  The xchg is relaxed in the C++ model (so the owner word
//     does not create happens-before edges that would hide a lock's missing
//     acquire/release from TSan) and a locked instruction on x86.
//   * counter check: each lock's `counter` is incremented non-atomically (a
//     load at entry, a store of +1 at exit, so the window spans the whole
//     critical section).  After the end barrier CPU 0 compares every lock's
//     counter with the acquisitions all CPUs counted privately (summed into
//     shared.totals) and adds |difference| (lost or extra updates) to its
//     violations, plus one for any lock still held.
// A broken lock (locks/busted.h) produces violations; a correct one never.
//
// LOCK EVENTS: out.lock_events[i] = this CPU's Env::events() counter i
// (LockEvent order) at the end minus at the start of the run (the Env's
// counters need not be reset between runs).
#pragma once

#include "lockvisor/abi/types.h"
#include "lockvisor/abi/ucall.h"
#include "lockvisor/abi/workload.h"
#include "lockvisor/abi/workload_limits.h"
#include "locks/atomic.h"
#include "locks/lock_env.h"
#include "locks/lock_events.h"
#include "workloads/platform.h"
#include "workloads/random.h"
#include "workloads/shared_state.h"

namespace lockvisor::workloads {

using abi::LockLayout;
using abi::WorkloadKind;
using abi::WorkloadParams;
using abi::WorkloadStats;

inline constexpr u64 kDefaultUncontendedIterations = abi::kUncontendedIterations;

// ---- names (for command lines and reports)
constexpr const char* kind_name(WorkloadKind k) {
  switch (k) {
    case WorkloadKind::kLockbench: return "lockbench";
    case WorkloadKind::kUncontended: return "uncontended";
    case WorkloadKind::kTorture: return "torture";
  }
  return "?";
}
constexpr const char* layout_name(LockLayout l) {
  switch (l) {
    case LockLayout::kStandalone: return "standalone";
    case LockLayout::kEmbedded: return "embedded";
  }
  return "?";
}

namespace detail {
constexpr bool streq(const char* a, const char* b) {
  while (*a && *a == *b) {
    a++;
    b++;
  }
  return *a == *b;
}
}  // namespace detail

// Name -> kind / layout; false if unknown.
constexpr bool parse_kind(const char* name, WorkloadKind* out) {
  constexpr WorkloadKind kKinds[] = {WorkloadKind::kLockbench, WorkloadKind::kUncontended, WorkloadKind::kTorture};
  for (WorkloadKind k : kKinds)
    if (detail::streq(name, kind_name(k))) {
      *out = k;
      return true;
    }
  return false;
}
constexpr bool parse_layout(const char* name, LockLayout* out) {
  constexpr LockLayout kLayouts[] = {LockLayout::kStandalone, LockLayout::kEmbedded};
  for (LockLayout l : kLayouts)
    if (detail::streq(name, layout_name(l))) {
      *out = l;
      return true;
    }
  return false;
}

// The host's choice of fairness window (WorkloadParams::fairness_window_ns):
// 10 ms (a few host scheduler slices), or duration / 20 when the run is
// shorter than 20 such windows, so that a short run still has 20 windows.
inline constexpr u64 kFairnessWindowNs = 10000000;
inline constexpr u64 kMinFairnessWindows = 20;
constexpr u64 default_fairness_window_ns(u64 duration_ns, u64 iterations) {
  if (iterations != 0 || duration_ns >= kFairnessWindowNs * kMinFairnessWindows) return kFairnessWindowNs;
  return duration_ns / kMinFairnessWindows != 0 ? duration_ns / kMinFairnessWindows : 1;
}
static_assert(default_fairness_window_ns(1000000000, 0) == 10000000);
static_assert(default_fairness_window_ns(100000000, 0) == 5000000);

// nullptr if p can be run, else a one-line reason.  (The header fields are
// checked separately, abi::check_header: native callers need not set them.)
// A field outside its range (abi::out_of_range, the rows the host's options
// use too) is reported by check_range() with its value; this gives the
// structural reasons.
constexpr const char* check_params(const WorkloadParams& p) {
  if (p.cpus == 0 || p.cpus > locks::kMaxCpus) return "cpus must be between 1 and 128";
  if (p.kind != WorkloadKind::kLockbench && p.kind != WorkloadKind::kUncontended && p.kind != WorkloadKind::kTorture)
    return "unknown workload kind";
  if (p.layout != LockLayout::kStandalone && p.layout != LockLayout::kEmbedded) return "unknown lock layout";
  if (abi::out_of_range(p) != nullptr) return "a workload parameter is out of its range";
  return nullptr;
}
static_assert(abi::kCsLines.max == kMaxCsLines && abi::kLocks.max == kMaxLocks && abi::kCpus.max == locks::kMaxCpus);

// Effective values: cs_lines 0 means 1 (line 0, with the checked counter, is
// always written); nlocks only matters for torture (0 means 1).
constexpr unsigned cs_lines_of(const WorkloadParams& p) {
  return p.cs_lines == 0 ? 1u : p.cs_lines > kMaxCsLines ? kMaxCsLines : static_cast<unsigned>(p.cs_lines);
}
constexpr unsigned nlocks_of(const WorkloadParams& p) {
  if (p.kind != WorkloadKind::kTorture || p.nlocks == 0) return 1;
  return p.nlocks > kMaxLocks ? kMaxLocks : static_cast<unsigned>(p.nlocks);
}

// ---- torture's random choices, separated out so the stream is testable.
struct TortureConfig {
  u64 nlocks;            // >= 1
  u64 max_hold_cycles;   // short holds are uniform in [0, max_hold_cycles]
  u64 long_hold_every;   // 0: never
  u64 long_hold_cycles;
};

struct TortureStep {
  unsigned lock;
  u64 hold_cycles;
  bool long_hold;
};

// Always consumes the same number of draws (3, or 2 without long holds), so
// the stream stays aligned whatever the outcomes.
constexpr TortureStep torture_step(Rng& rng, const TortureConfig& c) {
  TortureStep s{};
  s.lock = static_cast<unsigned>(rng.below(c.nlocks));
  s.hold_cycles = rng.below(c.max_hold_cycles + 1);  // max = ~0 wraps to below(0) = 0: fine
  if (c.long_hold_every != 0) {
    s.long_hold = rng.below(c.long_hold_every) == 0;
    if (s.long_hold) s.hold_cycles = c.long_hold_cycles;
  }
  return s;
}

template <class P>
constexpr TortureConfig torture_config(const WorkloadParams& p) {
  return TortureConfig{nlocks_of(p), P::ns_to_cycles(p.cs_ns), p.long_hold_every, P::ns_to_cycles(p.long_hold_ns)};
}

namespace detail {

using locks::Order;

// Accesses to the lock-protected data (see Platform::kAtomicCsData).
template <class P>
[[gnu::always_inline]] inline u64 data_load(const u64* p) {
  if constexpr (atomic_cs_data<P>()) {
    return locks::load_relaxed(p);
  } else {
    return *p;
  }
}
template <class P>
[[gnu::always_inline]] inline void data_store(u64* p, u64 v) {
  if constexpr (atomic_cs_data<P>()) {
    locks::store_relaxed(p, v);
  } else {
    *p = v;
  }
}

// Busy work until the TSC reaches `until` (no pause: see the file comment).
template <class P>
[[gnu::always_inline]] inline void busy_until(u64 until) {
  while (P::now() < until) locks::barrier();
}

constexpr u64 sat_add(u64 a, u64 b) { return a + b < a ? ~u64{0} : a + b; }

// The measured window's edges (see WHAT IS TIMED); nothing without the hook.
template <class P>
inline void window_mark(u64 edge) {
  if constexpr (requires { P::window_mark(edge); }) P::window_mark(edge);
}

// Per-CPU acquisitions per fairness window: `next` is the TSC at which the
// current window ends; advancing is rare (once per window), counting is one
// compare.
struct WindowCounter {
  u64* ops;      // out.window_ops
  u64 width;     // cycles; 0: no windows
  u64 next;      // end of window `index`
  unsigned index;

  // Width 0: disabled from the start (index past the last window).
  WindowCounter(u64* out, u64 start, u64 w)
      : ops(out), width(w), next(w != 0 ? sat_add(start, w) : ~u64{0}), index(w != 0 ? 0 : abi::kFairnessWindows) {}
  [[gnu::always_inline]] void count(u64 t) {
    if (t >= next) [[unlikely]] {
      while (t >= next && index < abi::kFairnessWindows) {
        next = sat_add(next, width);
        index++;
      }
      if (index >= abi::kFairnessWindows) next = ~u64{0};
    }
    if (index < abi::kFairnessWindows) ops[index]++;
  }
};

// The start barrier: the last CPU to arrive stamps the common start and
// deadline, then releases everyone.
template <class P>
inline void start_barrier(Barrier& b, u64 ncpus, u64 duration_cycles) {
  if (locks::fetch_add(&b.arrived, u32{1}, Order::acq_rel) + 1 == ncpus) {
    const u64 t = P::now();
    locks::store_relaxed(&b.start_tsc, t);
    locks::store_relaxed(&b.deadline_tsc, sat_add(t, duration_cycles));
    locks::store_release(&b.released, u32{1});
  } else {
    while (locks::load_acquire(&b.released) == 0) barrier_relax<P>();
  }
}

// The virtual NUMA hooks (see Platform::numa_node, numa_remote_cycles).
template <class P>
[[gnu::always_inline]] inline u64 node_tag_of(unsigned cpu) {
  if constexpr (requires { P::numa_node(cpu); }) {
    return u64{P::numa_node(cpu)} + 1;
  } else {
    return 1;
  }
}
template <class P>
[[gnu::always_inline]] inline u64 numa_remote_cycles() {
  if constexpr (requires { P::numa_remote_cycles(); }) {
    return P::numa_remote_cycles();
  } else {
    return 0;
  }
}

// Lock handoffs seen by one CPU (WorkloadStats::handoffs_*).
struct HandoffCount {
  u64 local = 0, remote = 0, self = 0;
};

// The critical section; returns the number of failed owner checks.
// `node_tag` is this CPU's node + 1, `tag` its cpu + 1. It reads who released
// the lock last: a CPU of this node (a local handoff), of another node (a
// remote one: `remote_cycles` of busy work first, the modelled remote cost),
// or this CPU itself; and leaves its own mark.
template <class P, class Lock>
[[gnu::always_inline]] inline u64 critical_section(LockSlot<Lock>& sl, unsigned lines, u32 tag, u64 hold_until,
                                                   u64 node_tag, u64 remote_cycles, HandoffCount& handoffs) {
  u64 bad = 0;
  if (locks::xchg(&sl.first.owner, tag, Order::relaxed) != 0) bad++;
  const u64 mark = node_tag << 32 | tag;
  const u64 last = data_load<P>(&sl.first.last_holder);
  if (last == mark) {
    handoffs.self++;
  } else if (last >> 32 == node_tag) {
    handoffs.local++;
  } else if (last != 0) {
    handoffs.remote++;
    if (remote_cycles != 0) busy_until<P>(P::now() + remote_cycles);
  }
  data_store<P>(&sl.first.last_holder, mark);
  const u64 count = data_load<P>(&sl.first.counter);
  data_store<P>(&sl.first.data, data_load<P>(&sl.first.data) + 1);
  for (unsigned i = 1; i < lines; i++) data_store<P>(&sl.more[i - 1].w[0], data_load<P>(&sl.more[i - 1].w[0]) + 1);
  if (hold_until != 0) busy_until<P>(hold_until);
  data_store<P>(&sl.first.counter, count + 1);
  if (locks::xchg(&sl.first.owner, u32{0}, Order::relaxed) != tag) bad++;
  return bad;
}

// lockbench (kTorture = false) and torture (true): the contended loop.
template <class Lock, class P, bool kTorture>
inline void contended_loop(const WorkloadParams& p, WorkloadShared<Lock>& s, unsigned cpu, u64 start, u64 deadline,
                           WorkloadStats& out, u64* acquisitions) {
  const u32 tag = cpu + 1;
  const unsigned lines = cs_lines_of(p);
  const u64 cs_cycles = P::ns_to_cycles(p.cs_ns);
  const u64 delay_cycles = P::ns_to_cycles(p.delay_ns);
  const TortureConfig tc = torture_config<P>(p);
  const u64 iterations = p.iterations;
  const u64 node_tag = node_tag_of<P>(cpu);
  const u64 remote_cycles = numa_remote_cycles<P>();
  Rng rng(p.seed, cpu);
  WindowCounter windows(out.window_ops, start, out.window_cycles);

  u64 ops = 0, bad = 0, lat_sum = 0, lat_max = 0;
  HandoffCount handoffs;
  for (;;) {
    unsigned li = 0;
    u64 hold = cs_cycles;
    if constexpr (kTorture) {
      const TortureStep st = torture_step(rng, tc);
      li = st.lock;
      hold = st.hold_cycles;
    }
    LockSlot<Lock>& sl = s.slots[li];
    Lock& lock = sl.lock(p.layout);

    const u64 t0 = P::now();
    if (iterations != 0 ? ops >= iterations : t0 >= deadline) break;
    on_lock_arrive<P>(li, t0);
    lock.lock();
    const u64 t1 = P::now();
    on_lock_acquired<P>(li, t0, t1);
    bad += critical_section<P>(sl, lines, tag, hold != 0 ? sat_add(t1, hold) : 0, node_tag, remote_cycles, handoffs);
    on_lock_releasing<P>(li, t1);
    lock.unlock();
    on_lock_release<P>(li);

    const u64 lat = t1 - t0;
    windows.count(t1);
    out.latency_buckets[abi::latency_bucket(lat)]++;
    lat_sum += lat;
    if (lat > lat_max) lat_max = lat;
    acquisitions[li]++;
    ops++;
    if (delay_cycles != 0) busy_until<P>(P::now() + delay_cycles);
  }
  out.ops = ops;
  out.violations += bad;
  out.handoffs_local = handoffs.local;
  out.handoffs_remote = handoffs.remote;
  out.handoffs_self = handoffs.self;
  out.latency_count = ops;
  out.latency_sum = lat_sum;
  out.latency_max = lat_max;
}

inline void clear(WorkloadStats& out) {
  out.version = out.cpu = out.ops = out.violations = out.elapsed_cycles = out.tsc_khz = 0;
  out.latency_count = out.latency_max = out.latency_sum = 0;
  for (u64& e : out.lock_events) e = 0;
  for (u64& b : out.latency_buckets) b = 0;
  out.pv_halts = out.window_cycles = 0;
  for (u64& w : out.window_ops) w = 0;
  out.handoffs_local = out.handoffs_remote = out.handoffs_self = 0;
  out.wake_interrupts = out.wake_woken = out.wake_spurious = out.wake_halts_skipped = 0;
  out.wake_handler_cycles = out.wake_handler_max_cycles = 0;
}

}  // namespace detail

template <class Env, class Lock, class P>
void run_workload(const WorkloadParams& p, WorkloadShared<Lock>& shared, unsigned cpu, WorkloadStats& out) {
  static_assert(locks::LockEnv<Env>);
  static_assert(locks::Lock<Lock>);
  static_assert(Platform<P>);
  static_assert(check_shared_layout<Lock>());
  static_assert(locks::kLockEventCount <= abi::kLockEventSlots);

  detail::clear(out);
  out.version = abi::kWorkloadStatsVersion;
  out.cpu = cpu;
  out.tsc_khz = P::tsc_khz();

  u64 events0[locks::kLockEventCount];
  for (unsigned i = 0; i < locks::kLockEventCount; i++) events0[i] = Env::events().get(static_cast<locks::LockEvent>(i));

  const u64 duration_cycles = p.iterations != 0 ? 0 : P::ns_to_cycles(p.duration_ns);
  detail::start_barrier<P>(shared.start, p.cpus, duration_cycles);
  const u64 start = locks::load_relaxed(&shared.start.start_tsc);
  const u64 deadline = locks::load_relaxed(&shared.start.deadline_tsc);
  out.window_cycles = P::ns_to_cycles(p.fairness_window_ns);
  detail::window_mark<P>(abi::kWindowStart);

  u64 acquisitions[kMaxLocks] = {};
  switch (p.kind) {
    case WorkloadKind::kLockbench:
      detail::contended_loop<Lock, P, false>(p, shared, cpu, start, deadline, out, acquisitions);
      out.elapsed_cycles = P::now() - start;
      break;
    case WorkloadKind::kUncontended:
      if (cpu == 0) {
        Lock& lock = shared.slots[0].lock(p.layout);
        const u64 n = p.iterations != 0 ? p.iterations : kDefaultUncontendedIterations;
        const u64 t0 = P::now();
        for (u64 i = 0; i < n; i++) {
          lock.lock();
          lock.unlock();
        }
        out.elapsed_cycles = P::now() - t0;
        out.ops = n;
      }
      break;
    case WorkloadKind::kTorture:
      detail::contended_loop<Lock, P, true>(p, shared, cpu, start, deadline, out, acquisitions);
      out.elapsed_cycles = P::now() - start;
      break;
  }

  detail::window_mark<P>(abi::kWindowEnd);
  for (unsigned i = 0; i < locks::kLockEventCount; i++)
    out.lock_events[i] = Env::events().get(static_cast<locks::LockEvent>(i)) - events0[i];

  // Publish this CPU's acquisition counts, then arrive (acq_rel: the last
  // arrival's read-modify-write sees every earlier CPU's totals and counter
  // writes, released by their own arrival).  Only the last one goes on.
  for (unsigned i = 0; i < kMaxLocks; i++)
    if (acquisitions[i] != 0) locks::fetch_add(&shared.totals[i], acquisitions[i], locks::Order::relaxed);
  if (locks::fetch_add(&shared.end.arrived, u32{1}, locks::Order::acq_rel) + 1 != p.cpus) return;

  for (unsigned i = 0; i < kMaxLocks; i++) {
    LockSlot<Lock>& sl = shared.slots[i];
    const u64 counted = detail::data_load<P>(&sl.first.counter);
    const u64 total = locks::load_relaxed(&shared.totals[i]);
    out.violations += counted > total ? counted - total : total - counted;
    if (sl.lock(p.layout).is_locked()) out.violations++;
  }
}

}  // namespace lockvisor::workloads
