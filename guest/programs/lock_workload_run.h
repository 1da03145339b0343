// The architecture-neutral half of the lock-workload programs (lockbench,
// uncontended, torture), which the x86 guest (programs/lock_workloads.cpp)
// and the RV64 guest (programs/riscv64_workloads.cpp) share: the VMM's
// WorkloadParams checked, the lock checked against the machine, and the
// shared workload code (guest/workloads/) run with the lock the parameters
// name. Each guest brings its own Env (wait, kick, counters) and Platform
// (clock, window marks, probes) and reports the WorkloadStats itself.
#pragma once
#include "locks/busted.h"
#include "locks/registry.h"
#include "lockvisor/abi/boot_info.h"
#include "lockvisor/abi/workload.h"
#include "lockvisor/abi/workload_limits.h"
#include "runtime/check.h"
#include "runtime/string.h"
#include "runtime/ucall_report.h"
#include "workloads/workloads.h"

namespace guest {

// The VMM's record, checked: flag, header, the program's kind, the CPU count.
inline const WorkloadParams& checked_workload_params(const BootInfo& info, WorkloadKind kind, u64 cpus) {
  if ((info.flags & kBootFlagWorkload) == 0)
    assert_fail(__FILE__, __LINE__, "no workload parameters in BootInfo (the VMM must write BootInfo::workload)");
  const WorkloadParams& p = info.workload;
  if (const char* why = check_header(p)) assert_fail(__FILE__, __LINE__, why);
  LV_CHECK_MSG(p.kind == kind, "BootInfo::workload is for another workload kind than this program");
  LV_CHECK_EQ(p.cpus, cpus);
  if (const lockvisor::abi::WorkloadLimit* l = lockvisor::abi::out_of_range(p))
    assert_fail(__FILE__, __LINE__,
                Text().str(l->name).str(" ").u(p.*(l->field)).str(" is out of range ").u(l->min).str("..").u(l->max).c_str());
  if (const char* why = lockvisor::workloads::check_params(p)) assert_fail(__FILE__, __LINE__, why);
  return p;
}

// A lock this machine cannot run fails the run before it starts: a PV lock
// without the kick (`pv_feature`, what the machine lacks, names it) would
// wait with nobody able to wake it.
inline void check_lock_fits(const char* name, bool pv_available, const char* pv_feature) {
  const lockvisor::locks::LockInfo* info = lockvisor::locks::find_lock(name);
  if (info != nullptr && info->needs_pv && !pv_available)
    assert_fail(__FILE__, __LINE__, Text().str(name).str(" needs ").str(pv_feature).str(", which this VM hides").c_str());
}

// Zero-initialised shared state, one per lock type: lives in .bss.
template <class Lock>
inline lockvisor::workloads::WorkloadShared<Lock> g_workload_shared;

// This CPU's part of the workload with the lock named in `params`.
template <class Env, class Platform>
void run_named_workload(const WorkloadParams& params, u32 cpu, WorkloadStats& stats) {
  const char* name = params.lock;
  auto run_with = [&]<class Lock>() {
    lockvisor::workloads::run_workload<Env, Lock, Platform>(params, g_workload_shared<Lock>, cpu, stats);
  };
  bool known = lockvisor::locks::with_lock_type<Env>(name, run_with);
  // The deliberately broken lock, never listed: the negative control that
  // proves the in-guest mutual-exclusion checks can fail.
  if (!known && str_equal(name, "busted")) {
    run_with.template operator()<lockvisor::locks::BustedLock<Env, 1u << 10>>();
    known = true;
  }
  if (!known) assert_fail(__FILE__, __LINE__, Text().str("unknown lock '").str(name).str("'").c_str());
}

}  // namespace guest
