// The first RV64 guest program: boots every hart, checks the wait/kick latch,
// runs the torture workload (guest/workloads) on every lock of the registry,
// one lock after another, on all harts at once, and reports one line per lock:
//
//   lockvisor rv64 guest: 4 harts, boot hart 0, lock clock 10000 kHz
//   sbi pvlock 0x50564c4b: absent            (one line per PVLOCK EID)
//   wake kick-to-self: ok
//   wake kick-before-wait: ok
//   lock ticket: ok acquisitions=4000/4000 counted=4000 violations=0 waits=0 halts=0 kicks=0
//   ...
//   PASS                                       (or FAIL; then SBI SRST)
//
// Every lock builds for RV64 (the registry's locks are architecture-neutral:
// locks/arch/ holds the only per-architecture code), so every lock runs;
// the PV ones wait with WFI and kick with the SBI IPI
// (runtime/riscv64/wake.h). A lock passes when its workload counted no
// mutual-exclusion violation (owner word and non-atomic counters:
// workloads/workloads.h) and the acquisitions add up to harts x iterations.
// tests/riscv/boot_guest.sh reads these lines.
#include "locks/registry.h"
#include "lockvisor/abi/sbi_pvlock.h"
#include "lockvisor/abi/workload_limits.h"
#include "runtime/format.h"
#include "runtime/riscv64/hart.h"
#include "programs/riscv64_platform.h"
#include "programs/riscv64_programs.h"
#include "runtime/riscv64/lock_env.h"
#include "runtime/riscv64/sbi.h"
#include "workloads/workloads.h"

namespace guest::riscv {
namespace {
namespace lk = lockvisor::locks;
namespace wl = lockvisor::workloads;

// Acquisitions per hart per lock: enough for every hart to contend on the
// torture's locks many times, few enough for TCG on a loaded 2-core host.
constexpr u64 kIterations = 1000;
// Short holds: TCG runs a critical section hundreds of times slower than
// hardware already.
constexpr u64 kHoldNs = 2000;

WorkloadParams torture_params() {
  WorkloadParams p = default_workload_params(WorkloadKind::kTorture);
  p.iterations = kIterations;
  p.cpus = hart_count();
  p.cs_ns = kHoldNs;
  p.long_hold_ns = 10 * kHoldNs;
  p.fairness_window_ns = 0;
  return p;
}

WorkloadParams g_params;
template <class L>
wl::WorkloadShared<L> g_shared;  // zero: one run per lock per boot

// One hart's outcome for one lock, copied out of its WorkloadStats before it
// moves on to the next lock (which clears them).
struct HartResult {
  u64 ops, violations, waits, kicks, halts;
};
HartResult g_results[lk::kLockCount][kRiscvMaxHarts];
u32 g_done[lk::kLockCount];  // harts finished with lock i
// Each hart's WorkloadStats, out of its 16 KiB stack (they are kilobytes).
WorkloadStats g_stats[kRiscvMaxHarts];

// Lock `index` on this hart: the workload, then its result published.
template <class L>
void run_lock(unsigned index) {
  const unsigned hart = this_hart();
  WorkloadStats& stats = g_stats[hart];
  const u64 halts0 = g_halts[hart];
  wl::run_workload<RiscvLockEnv, L, RiscvPlatform>(g_params, g_shared<L>, hart, stats);
  g_results[index][hart] = HartResult{stats.ops, stats.violations,
                                      stats.lock_events[static_cast<unsigned>(lk::LockEvent::pv_wait)],
                                      stats.lock_events[static_cast<unsigned>(lk::LockEvent::pv_kick)],
                                      g_halts[hart] - halts0};
  lk::fetch_add(&g_done[index], u32{1}, lk::Order::release);
}

// The boot hart, once every hart is done with lock `index`: its line.
template <class L>
bool report_lock(unsigned index, const char* name) {
  while (lk::load_acquire(&g_done[index]) != hart_count()) lk::cpu_relax();
  HartResult sum{};
  for (unsigned h = 0; h < hart_count(); h++) {
    const HartResult& r = g_results[index][h];
    sum.ops += r.ops;
    sum.violations += r.violations;
    sum.waits += r.waits;
    sum.kicks += r.kicks;
    sum.halts += r.halts;
  }
  // The non-atomic counters of the locks the torture used (the workload
  // compares them with the acquisitions too; this is the line's evidence).
  u64 counted = 0;
  for (unsigned i = 0; i < wl::nlocks_of(g_params); i++) counted += g_shared<L>.slots[i].first.counter;
  const u64 expected = g_params.iterations * hart_count();
  const bool ok = sum.violations == 0 && sum.ops == expected && counted == expected;
  print_line(Text()
                 .str("lock ")
                 .str(name)
                 .str(ok ? ": ok" : ": FAILED")
                 .str(" acquisitions=")
                 .u(sum.ops)
                 .str("/")
                 .u(expected)
                 .str(" counted=")
                 .u(counted)
                 .str(" violations=")
                 .u(sum.violations)
                 .str(" waits=")
                 .u(sum.waits)
                 .str(" halts=")
                 .u(sum.halts)
                 .str(" kicks=")
                 .u(sum.kicks));
  return ok;
}

// Every hart runs every lock in registry order; the start barrier inside
// run_workload holds everyone until all harts arrive, so the boot hart
// reports lock i (waiting on g_done) before anyone starts lock i + 1.
bool run_all_locks() {
  bool ok = true;
  unsigned index = 0;
  for (const lk::LockInfo& info : lk::kLocks) {
    lk::with_lock_type<RiscvLockEnv>(info.name, [&]<class L>() {
      run_lock<L>(index);
      if (this_hart() == boot_hart()) ok = report_lock<L>(index, info.name) && ok;
    });
    index++;
  }
  return ok;
}

// The wait/kick latch (runtime/riscv64/wake.h), checked before any lock
// relies on it. Each wait below is on a byte that never changes, so it
// executes WFI and returns only because a kick is pending: a latch that lost
// the kick would hang the hart, and the test's time limit would fail it.
// Kicks coalesce, so the two cases must not overlap: the self-kick runs
// before the other harts start.
u8 g_never_changes;
u32 g_kicked;  // the kicker hart has sent its kick

unsigned kicker_hart() { return boot_hart() == 0 ? 1 : 0; }

bool print_wait_result(const char* name, u64 halts0) {
  const bool ok = g_halts[this_hart()] == halts0 + 1;
  print_line(Text().str("wake ").str(name).str(ok ? ": ok" : ": FAILED (the wait did not execute WFI)"));
  return ok;
}

// A kick to oneself, then a wait.
bool check_kick_to_self() {
  const u64 halts0 = g_halts[this_hart()];
  RiscvLockEnv::kick(this_hart());
  RiscvLockEnv::wait(&g_never_changes, 0);
  return print_wait_result("kick-to-self", halts0);
}

// Another hart kicks this one while it spins; the wait comes after.
bool check_kick_before_wait() {
  while (lk::load_acquire(&g_kicked) == 0) lk::cpu_relax();
  const u64 halts0 = g_halts[this_hart()];
  RiscvLockEnv::wait(&g_never_changes, 0);
  return print_wait_result("kick-before-wait", halts0);
}

void other_hart() {
  if (this_hart() == kicker_hart()) {  // check_kick_before_wait's kicker
    RiscvLockEnv::kick(boot_hart());
    lk::store_release(&g_kicked, u32{1});
  }
  run_all_locks();
}

// SBI PVLOCK at each of its EIDs: nothing below this guest serves it yet
// (OpenSBI does not; stock KVM answers the proposals itself with "not
// supported"), so each line says whether the probe found it.
void probe_pvlock() {
  constexpr u32 kEids[] = {kSbiExtPvlock, kSbiExtPvlockLegacy, kSbiExtPvlockExperimentalDefault};
  for (u32 eid : kEids)
    print_line(Text().str("sbi pvlock ").hex(eid).str(sbi_probe(eid) ? ": present" : ": absent"));
}

}  // namespace

void program_smoke() {
  probe_pvlock();
  set_lock_env_features();
  if (!g_pv_available) fail("SBI IPI is missing: the PV locks could not kick");
  g_params = torture_params();
  if (const char* why = wl::check_params(g_params)) fail(why);
  bool ok = check_kick_to_self();
  start_other_harts(&other_hart);
  if (hart_count() >= 2) ok = check_kick_before_wait() && ok;
  ok = run_all_locks() && ok;
  if (!ok) finish(false);
}

}  // namespace guest::riscv
