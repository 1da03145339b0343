// SBI PVLOCK under lockvisor's RISC-V VMM, from the guest's side: the
// programs the VMM's conformance runs (2 harts each). Each check sits inside
// a case (CASE_BEGIN/CASE_END); the values go out as RESULTs for the VMM to
// compare, and a wrong one fails the case in the guest as well.
//
// rv-sbi-pvlock. With kBootFlagSbiPvlock set (the VMM latches kicks:
// sticky):
//   probe_alias, probe_pvlk, probe_legacy   SBI BASE probe_extension of
//       BootInfo's alias, 0x50564C4B and 0xAB0401: 1 or 0 (the alias must
//       answer 1; the other two only where the host kernel forwards them)
//   kick_bad_hart_error     KICK_CPU to hart vcpu_count + 5 (-3, invalid param)
//   kick_unknown_fid_error  FID 1 at the alias (-2, not supported)
//   kick_self_error         KICK_CPU to the hart itself (0)
//   self_wait_returned      1: after that self-kick, a wait() on a byte that
//       never changes returns (the kick was kept until the WFI)
//   peer_woken              1, from hart 1: it waits; hart 0 polls
//       kLvSbiQueryHalted(1) until hart 1 is blocked in WFI, then kicks it
// With the flag clear: the probes (the alias answers 0) and the three kick
// errors (each -2), no wait.
//
// rv-kick-before-wait. Hart 1 says it spins; hart 0 kicks it, then sets a
// flag; hart 1 sees the flag, so the kick came before its WFI, and waits
// once on a byte that never changes: RESULT early_kick_kept = 1. Sticky kicks
// make that wait return; under the series' own semantics (--sbi-kick
// proposed) hart 1 never returns, and the VMM's lost-wakeup detector must
// report it.
#include "locks/atomic.h"
#include "lockvisor/abi/sbi_lockvisor.h"
#include "lockvisor/abi/sbi_pvlock.h"
#include "programs/riscv64_programs.h"
#include "runtime/check.h"
#include "runtime/riscv64/boot_info.h"
#include "runtime/riscv64/hart.h"
#include "runtime/riscv64/lock_env.h"
#include "runtime/riscv64/lockvisor_sbi.h"
#include "runtime/riscv64/sbi.h"
#include "runtime/riscv64/wake.h"
#include "runtime/ucall_report.h"

namespace guest::riscv {
namespace {
namespace lk = lockvisor::locks;

constexpr u32 kUnknownPvlockFid = 1;
constexpr unsigned kWaiter = 1;  // the hart that waits; hart 0 kicks

u8 g_never_changes;  // the byte every wait here waits on: only a kick ends it
u32 g_spinning;      // rv-kick-before-wait: hart 1 is spinning
u32 g_kicked;        // rv-kick-before-wait: hart 0 has kicked hart 1

bool pvlock_on() { return (boot_info()->flags & kBootFlagSbiPvlock) != 0; }
u32 alias() { return boot_info()->sbi_experimental_eid; }

// One wait, which must execute WFI (the byte never changes) and return.
bool waited_once() {
  const u64 halts0 = g_halts[this_hart()];
  RiscvLockEnv::wait(&g_never_changes, 0);
  return g_halts[this_hart()] == halts0 + 1;
}

void probes(bool on) {
  Case c("probe");
  const bool at_alias = sbi_probe(alias());
  report_result("probe_alias", at_alias);
  report_result("probe_pvlk", sbi_probe(kSbiExtPvlock));
  report_result("probe_legacy", sbi_probe(kSbiExtPvlockLegacy));
  LV_CHECK_EQ(at_alias, on);
}

void kick_errors(bool on) {
  {
    Case c("kick-bad-hart");
    const i64 error = pvlock_kick(alias(), u64{hart_count()} + 5).error;
    report_result("kick_bad_hart_error", static_cast<u64>(error), ResultKind::kSigned);
    LV_CHECK_EQ(error, on ? kSbiErrInvalidParam : kSbiErrNotSupported);
  }
  {
    Case c("kick-unknown-fid");
    const i64 error = sbi_call(alias(), kUnknownPvlockFid, kWaiter).error;
    report_result("kick_unknown_fid_error", static_cast<u64>(error), ResultKind::kSigned);
    LV_CHECK_EQ(error, kSbiErrNotSupported);
  }
  {
    Case c("kick-self");
    const i64 error = pvlock_kick(alias(), this_hart()).error;
    report_result("kick_self_error", static_cast<u64>(error), ResultKind::kSigned);
    LV_CHECK_EQ(error, on ? kSbiSuccess : kSbiErrNotSupported);
  }
}

// Hart 0, PVLOCK on: the self-kick above is pending; then the peer.
void self_wait_and_wake_peer() {
  {
    Case c("self-wait");
    const bool returned = waited_once();
    report_result("self_wait_returned", returned);
    LV_CHECK(returned);
  }
  Case c("peer-kick");
  for (;;) {
    const SbiRet halted = lv_query_halted(kWaiter);
    LV_CHECK_EQ(halted.error, kSbiSuccess);
    if (halted.value == 1) break;
    lk::cpu_relax();
  }
  LV_CHECK_EQ(pvlock_kick(alias(), kWaiter).error, kSbiSuccess);
}

// Hart 1, PVLOCK on: one wait that only hart 0's kick ends.
void wait_for_peer_kick() {
  Case c("peer-woken");
  const bool woke = waited_once();
  report_result("peer_woken", woke);
  LV_CHECK(woke);
}

}  // namespace

void program_sbi_pvlock() {
  LV_CHECK_GE(hart_count(), 2u);
  const bool on = pvlock_on();
  if (this_hart() == 0) {
    probes(on);
    kick_errors(on);
    if (on) self_wait_and_wake_peer();
  } else if (this_hart() == kWaiter && on) {
    wait_for_peer_kick();
  }
}

void program_kick_before_wait() {
  LV_CHECK_GE(hart_count(), 2u);
  LV_CHECK_MSG(pvlock_on(), "rv-kick-before-wait needs SBI PVLOCK on");
  if (this_hart() == 0) {
    while (lk::load_acquire(&g_spinning) == 0) lk::cpu_relax();
    LV_CHECK_EQ(pvlock_kick(alias(), kWaiter).error, kSbiSuccess);
    lk::store_release(&g_kicked, u32{1});
  } else if (this_hart() == kWaiter) {
    Case c("kick-before-wait");
    lk::store_release(&g_spinning, u32{1});
    while (lk::load_acquire(&g_kicked) == 0) lk::cpu_relax();
    const bool kept = waited_once();
    report_result("early_kick_kept", kept);
    LV_CHECK(kept);
  }
}

}  // namespace guest::riscv
