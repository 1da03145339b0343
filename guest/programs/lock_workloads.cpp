// lockbench / uncontended / torture in the guest: parse the arguments into
// WorkloadParams, pick the lock by name, run the shared workload code
// (guest/workloads/) on every vCPU and report each vCPU's WorkloadStats.
//   lock=NAME cs=NS cs_lines=N delay=NS duration_ms=MS iterations=N
//   layout=standalone|embedded locks=N long_hold_ns=NS long_hold_every=N
#include "locks/busted.h"
#include "locks/registry.h"
#include "lockvisor/abi/workload.h"
#include "programs/programs.h"
#include "runtime/boot.h"
#include "runtime/check.h"
#include "runtime/cpu.h"
#include "runtime/lock_env.h"
#include "runtime/lock_tuning.h"
#include "runtime/report.h"
#include "runtime/string.h"
#include "workloads/workloads.h"

namespace guest {

LockFeatures g_lock_features;
lockvisor::locks::LockEvents g_lock_events[kMaxVcpus];

void init_lock_features() {
  // Every vCPU computes the same answer; the writes race harmlessly.
  g_lock_features.pv_unhalt = pv_unhalt_advertised();
  g_lock_features.dedicated = realtime_hint();
}

namespace {

struct GuestPlatform {
  static u64 now() { return rdtsc(); }
  static u64 ns_to_cycles(u64 ns) { return guest::ns_to_tsc(ns); }
  static u64 tsc_khz() { return guest::tsc_khz(); }
};

// Zero-initialised shared state, one per lock type: lives in .bss.
template <class Lock>
lockvisor::workloads::WorkloadShared<Lock> g_shared;
WorkloadStats g_stats[kMaxVcpus];

WorkloadParams parse_params(WorkloadKind kind) {
  WorkloadParams p{};
  p.kind = kind;
  p.cs_ns = arg_u64("cs", 100);
  p.cs_lines = arg_u64("cs_lines", 1);
  p.delay_ns = arg_u64("delay", 170);
  p.duration_ns = arg_u64("duration_ms", 1000) * 1000000;
  p.iterations = arg_u64("iterations", kind == WorkloadKind::kUncontended ? 262144 : 0);
  char layout[16] = "standalone";
  arg_str("layout", layout, sizeof layout);
  LV_CHECK_MSG(str_equal(layout, "standalone") || str_equal(layout, "embedded"), "layout must be standalone or embedded");
  p.layout = str_equal(layout, "embedded") ? LockLayout::kEmbedded : LockLayout::kStandalone;
  p.seed = boot().seed;
  p.nlocks = arg_u64("locks", kind == WorkloadKind::kTorture ? 4 : 1);
  p.long_hold_ns = arg_u64("long_hold_ns", 100000);
  p.long_hold_every = arg_u64("long_hold_every", kind == WorkloadKind::kTorture ? 2000 : 0);
  p.cpus = nr_cpus();
  return p;
}

void run(WorkloadKind kind) {
  init_lock_features();
  char name[32] = "auto";
  arg_str("lock", name, sizeof name);
  apply_lock_tuning(/*report=*/this_cpu() == 0 && str_equal(name, "pvbounded") && kind != WorkloadKind::kUncontended);
  // A PV lock without PV_UNHALT would halt with nobody able to wake it.
  if ((str_equal(name, "pvqspinlock") || str_equal(name, "pvticket")) && !g_lock_features.pv_unhalt)
    assert_fail(__FILE__, __LINE__, Text().str(name).str(" needs KVM_FEATURE_PV_UNHALT, which this VM hides").c_str());
  const WorkloadParams params = parse_params(kind);
  const u32 cpu = this_cpu();
  auto run_with = [&]<class Lock>() {
    lockvisor::workloads::run_workload<GuestLockEnv, Lock, GuestPlatform>(params, g_shared<Lock>, cpu, g_stats[cpu]);
  };
  bool known = lockvisor::locks::with_lock_type<GuestLockEnv>(name, run_with);
  // The deliberately broken lock, never listed: the negative control that
  // proves the in-guest mutual-exclusion checks can fail.
  if (!known && str_equal(name, "busted")) {
    run_with.operator()<lockvisor::locks::BustedLock<GuestLockEnv, 1u << 10>>();
    known = true;
  }
  if (!known) assert_fail(__FILE__, __LINE__, Text().str("unknown lock '").str(name).str("'").c_str());
  report_array(kWorkloadStatsKey, reinterpret_cast<const u64*>(&g_stats[cpu]), kWorkloadStatsWords,
               ResultKind::kUnsigned);
}

}  // namespace

void program_lockbench() { run(WorkloadKind::kLockbench); }
void program_uncontended() { run(WorkloadKind::kUncontended); }
void program_torture() { run(WorkloadKind::kTorture); }

}  // namespace guest
