// lockbench / uncontended / torture on the RV64 guest under lockvisor: the
// x86 programs' contract (programs/lock_workloads.cpp) with the RV64 Env.
// BootInfo::workload (binary, checked as on x86: programs/lock_workload_run.h)
// names the lock and the parameters, BootInfo::args the lock tuning
// (runtime/lock_tuning.h, as on x86); every hart runs the shared workload code
// with RiscvLockEnv (wait = WFI, kick = SBI PVLOCK KICK_CPU: wake.h) and
// reports its WorkloadStats as one RESULT_ARRAY, with the window marks as
// ucalls. The halts are the WFIs wait() executed (pv_halts) and the kicks
// the Env::kick calls (lock_events[pv_kick]), each one SBI call: the VMM
// compares them with its own counts of WFI exits and KICK_CPU calls.
#include "lockvisor/abi/workload.h"
#include "programs/lock_workload_run.h"
#include "programs/riscv64_platform.h"
#include "programs/riscv64_programs.h"
#include "runtime/lock_tuning.h"
#include "runtime/riscv64/boot_info.h"
#include "runtime/riscv64/hart.h"
#include "runtime/riscv64/lock_env.h"
#include "runtime/ucall_report.h"

namespace guest::riscv {
namespace {

struct WorkloadPlatform : RiscvPlatform {
  static void window_mark(u64 edge) { report_window_mark(edge); }
};

WorkloadStats g_workload_stats[kRiscvMaxHarts];  // kilobytes each: off the hart stacks

void run(WorkloadKind kind) {
  const WorkloadParams& params = checked_workload_params(*boot_info(), kind, hart_count());
  // Every hart sets the same values; one reports them, as on x86.
  apply_lock_tuning(/*report_for=*/this_hart() == 0 && kind != WorkloadKind::kUncontended ? params.lock : nullptr);
  check_lock_fits(params.lock, RiscvLockEnv::pv_available(), "SBI PVLOCK (kBootFlagSbiPvlock)");
  const unsigned hart = this_hart();
  run_named_workload<RiscvLockEnv, WorkloadPlatform>(params, hart, g_workload_stats[hart]);
  g_workload_stats[hart].pv_halts = g_halts[hart];
  report_array(kWorkloadStatsKey, reinterpret_cast<const u64*>(&g_workload_stats[hart]), kWorkloadStatsWords,
               ResultKind::kUnsigned);
}

}  // namespace

void program_lockbench() { run(WorkloadKind::kLockbench); }
void program_uncontended() { run(WorkloadKind::kUncontended); }
void program_torture() { run(WorkloadKind::kTorture); }

}  // namespace guest::riscv
