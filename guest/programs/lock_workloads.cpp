// lockbench / uncontended / torture in the guest: take the WorkloadParams
// the VMM wrote into BootInfo::workload (binary; no text, no defaults here:
// a missing or mismatched record fails the run with a clear report), pick
// the lock by name, run the shared workload code (guest/workloads/) on every
// vCPU and report each vCPU's WorkloadStats.  The window marks are one ucall
// each (kWindowMark), so the VMM samples host-side costs over the measured
// window only.
#include "lockvisor/abi/workload.h"
#include "programs/lock_workload_run.h"
#include "programs/programs.h"
#include "runtime/boot.h"
#include "runtime/check.h"
#include "runtime/cpu.h"
#include "runtime/guest_lock_env.h"
#include "runtime/lock_probe.h"
#include "runtime/lock_trace.h"
#include "runtime/lock_tuning.h"
#include "runtime/numa.h"
#include "runtime/ucall_report.h"
#include "runtime/string.h"
#include "workloads/workloads.h"

namespace guest {

LockFeatures g_lock_features;
lockvisor::locks::LockEvents g_lock_events[kMaxVcpus];

void init_lock_features() {
  // Every vCPU computes the same answer; the writes race harmlessly.
  g_lock_features.pv_unhalt = pv_unhalt_advertised();
  g_lock_features.dedicated = realtime_hint();
  init_pv_wake();
  g_lock_features.bounded_wait = pv_wake_bounded();
}

namespace {

// The guest Env, counting the halts its wait() executes (pv_wait counts
// calls, some of which find the condition gone and do not halt), so that a
// test can compare the guest's halts with the VMM's exactly.
// WorkloadParams::wait_halt_delay_ns (D) forces the lost-wake-up interleaving
// (a test knob for --kick lossy): after the re-check, the waiter waits up to
// D for the waker to change the condition, then D more for the kick that
// follows that write, and only then halts. A fixed delay alone is not
// enough: on a loaded host the waker often does not run during the window,
// and a negative control that only usually fails proves nothing.
u64 g_halts[kMaxVcpus];
u64 g_wait_halt_delay_ns;

void late_halt_window(volatile u8* ptr, u8 val) {
  const u64 span = ns_to_tsc(g_wait_halt_delay_ns);
  const u64 until_change = rdtsc() + span;
  while (*ptr == val && rdtsc() < until_change) cpu_relax();
  const u64 until_kick = rdtsc() + span;
  while (rdtsc() < until_kick) cpu_relax();
}
//
// relax() and wait() are also where a waiter is seen enqueued for the lock
// probe (runtime/lock_probe.h): every lock spins through spin_relax<Env>()
// or halts through Env::wait() while it waits. With the probe off each adds
// one predictable branch.
struct WorkloadEnv : GuestLockEnv {
  static void relax() {
    if (g_lock_probe_on) [[unlikely]]
      lock_probe_spin();
    lockvisor::locks::cpu_relax();
  }
  static void wait(volatile u8* ptr, u8 val) {
    if (ready_to_halt(ptr, val) && pv_wake_wait(ptr, val)) g_halts[this_cpu()]++;
  }
  static bool wait_for(volatile u8* ptr, u8 val, u64 ns) {
    if (!ready_to_halt(ptr, val)) return false;
    g_halts[this_cpu()]++;  // the doorbell halts every time
    return pv_wake_halt_for(ns);
  }

 private:
  // What every halt of both waits goes through: the probe, the re-check,
  // and the widened window. False: the condition is gone, do not halt.
  static bool ready_to_halt(volatile u8* ptr, u8 val) {
    if (g_lock_probe_on) [[unlikely]]
      lock_probe_spin();
    if (*ptr != val) return false;
    if (g_wait_halt_delay_ns != 0) late_halt_window(ptr, val);
    return true;
  }
};

// --trace: each vCPU's lock-trace log block (null: not tracing), the
// arrival time of its acquisition in progress (runtime/lock_trace.h) and its
// acquisition-path counters as of its last record. Cache-line aligned per
// vCPU: the hot loop must not share lines between vCPUs.
struct alignas(64) TraceSlot {
  LockTraceHeader* log;
  u64 arrive;
  u64 seen[lockvisor::locks::kAcqPathCount];  // [0] (fast) unused: it has no counter
};
TraceSlot g_trace[kMaxVcpus];

// The path of the acquisition being recorded: the path counter that moved
// since the previous record (every path but `fast` counts itself, once per
// acquisition: locks/lock_events.h); none moved, the fast path. Tracing
// only: untraced runs never read the counters here.
u32 acquisition_path(TraceSlot& slot) {
  const lockvisor::locks::LockEvents& events = g_lock_events[this_cpu()];
  u32 path = 0;
  for (unsigned p = 1; p < lockvisor::locks::kAcqPathCount; p++) {
    const u64 count = events.get(lockvisor::locks::kAcqPathEvents[p]);
    if (count == slot.seen[p]) continue;
    if (path == 0) path = p;
    slot.seen[p] = count;
  }
  return path;
}

void start_path_counts(TraceSlot& slot) {
  const lockvisor::locks::LockEvents& events = g_lock_events[this_cpu()];
  for (unsigned p = 1; p < lockvisor::locks::kAcqPathCount; p++)
    slot.seen[p] = events.get(lockvisor::locks::kAcqPathEvents[p]);
}

struct GuestPlatform {
  static u64 now() { return rdtsc(); }
  static u64 ns_to_cycles(u64 ns) { return guest::ns_to_tsc(ns); }
  static u64 tsc_khz() { return guest::tsc_khz(); }
  static u32 numa_node(unsigned cpu) { return guest::numa_node_of(cpu); }
  static u64 numa_remote_cycles() { return guest::ns_to_tsc(guest::numa_remote_ns()); }
  static void window_mark(u64 edge) { report_window_mark(edge); }
  // The lock probe's hooks (targeted preemption, docs/preemption.md) and the
  // timeline's acquisitions (docs/trace.md), both without exits; each costs
  // one predictable branch when off.
  static void on_lock_arrive(unsigned lock, u64 /*t0*/) {
    if (g_lock_probe_on) [[unlikely]]
      lock_probe_arrive(lock);
  }
  static void on_lock_acquired(unsigned lock, u64 t0, u64 /*t1*/) {
    if (g_lock_probe_on) [[unlikely]]
      lock_probe_acquired(lock);
    TraceSlot& slot = g_trace[this_cpu()];
    if (slot.log != nullptr) slot.arrive = t0;
  }
  // The record is written while the lock is still held, with the release
  // time read here: a preemption right after the release is not the hold's.
  // (Tracing only: it adds a 32-byte store to the traced critical section.)
  static void on_lock_releasing(unsigned lock, u64 t1) {
    TraceSlot& slot = g_trace[this_cpu()];
    if (slot.log != nullptr) lock_trace_record(slot.log, lock, slot.arrive, t1, now(), acquisition_path(slot));
  }
  static void on_lock_release(unsigned lock) {
    if (g_lock_probe_on) [[unlikely]]
      lock_probe_release(lock);
  }
};

WorkloadStats g_stats[kMaxVcpus];

void run(WorkloadKind kind) {
  init_lock_features();
  lock_probe_init();
  const WorkloadParams& params = checked_workload_params(boot(), kind, nr_cpus());
  const char* name = params.lock;
  g_wait_halt_delay_ns = params.wait_halt_delay_ns;  // every vCPU writes the same value
  apply_lock_tuning(/*report_for=*/this_cpu() == 0 && kind != WorkloadKind::kUncontended ? name : nullptr);
  // What pvb_head_halt became on this run's halt (pvbounded.h, "HOW A
  // RESERVED HEAD WAITS"): 1 when its unlock may be a plain store.
  if (this_cpu() == 0 && kind != WorkloadKind::kUncontended && str_equal(name, "pvbounded"))
    report_result("pvb_store_release", lockvisor::locks::pvb::unlock_may_store<WorkloadEnv>() ? 1 : 0);
  check_lock_fits(name, g_lock_features.pv_unhalt, "KVM_FEATURE_PV_UNHALT");
  const u32 cpu = this_cpu();
  lock_trace_init();
  g_trace[cpu].log = lock_trace_block(cpu);
  if (g_trace[cpu].log != nullptr) start_path_counts(g_trace[cpu]);
  run_named_workload<WorkloadEnv, GuestPlatform>(params, cpu, g_stats[cpu]);
  g_stats[cpu].pv_halts = g_halts[cpu];
  const PvWakeCounts wake = pv_wake_counts(cpu);
  g_stats[cpu].wake_interrupts = wake.interrupts;
  g_stats[cpu].wake_woken = wake.woken;
  g_stats[cpu].wake_spurious = wake.spurious;
  g_stats[cpu].wake_halts_skipped = wake.halts_skipped;
  g_stats[cpu].wake_handler_cycles = wake.handler_cycles;
  g_stats[cpu].wake_handler_max_cycles = wake.handler_max_cycles;
  if (g_lock_probe_on) lock_probe_report();
  report_array(kWorkloadStatsKey, reinterpret_cast<const u64*>(&g_stats[cpu]), kWorkloadStatsWords,
               ResultKind::kUnsigned);
}

}  // namespace

void program_lockbench() { run(WorkloadKind::kLockbench); }
void program_uncontended() { run(WorkloadKind::kUncontended); }
void program_torture() { run(WorkloadKind::kTorture); }

}  // namespace guest
