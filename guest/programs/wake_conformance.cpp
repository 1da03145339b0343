// Guest half of the wake-mechanism conformance cases (--pv-wake ipi|nmi;
// vmm/conformance/cases.cpp, "wake-*"). vCPU 0 waits, vCPU 1 wakes it:
//   1. before the halt: vCPU 1 sends the wake-up while vCPU 0 runs with IF=0,
//      outside any wait; then vCPU 0 waits once on a condition nobody clears.
//      It must come back: an IPI waits in the LAPIC and ends the `hlt` at
//      once (the halt runs), an NMI is taken at once, counted spurious, and
//      its pending flag makes the wait return without a halt. A lost wake-up
//      leaves both vCPUs halted: the deadlock detector ends the run.
//   2. after the halt: vCPU 1 waits until vCPU 0 is blocked in KVM, then
//      wakes it.
//   3. to an APIC ID no vCPU has: nothing is delivered anywhere.
// vCPU 0 reports whether the first wait halted and its handler's counts.
#include "programs/programs.h"
#include "runtime/boot.h"
#include "runtime/check.h"
#include "runtime/cpu.h"
#include "runtime/pv.h"
#include "runtime/shared.h"
#include "runtime/ucall_report.h"
#include "runtime/wake.h"

namespace guest {
namespace {

constexpr u32 kNoSuchApicId = 99;
constexpr u64 kSettleNs = 5'000'000;  // for a wake-up that would arrive after all

Shared<u32> g_phase;
u8 g_never_cleared = 1;  // a wait condition that stays true: only a wake-up ends the wait

}  // namespace

void program_wake_conformance() {
  LV_CHECK_MSG(pv_wake() != PvWake::kHypercall, "wake-conformance needs --pv-wake ipi or nmi");
  init_pv_wake();
  volatile u8* cond = &g_never_cleared;
  if (this_cpu() == 0) {
    g_phase.store(1);
    g_phase.wait_for(2);  // the wake-up is sent
    // An NMI is taken at once; wait until its handler has run, so that the
    // wait below really comes after it. An IPI stays pending (IF=0).
    if (pv_wake() == PvWake::kNmi)
      while (pv_wake_counts(0).interrupts == 0) cpu_relax();
    else
      spin_ns(kSettleNs);
    const bool halted = pv_wake_wait(cond, 1);
    report_result("before_halt_halted", halted ? 1 : 0);
    g_phase.store(3);
    pv_wake_wait(cond, 1);  // phase 2: woken after it blocked
    g_phase.store(4);
    g_phase.wait_for(5);  // phase 3 done
    spin_ns(kSettleNs);
    const PvWakeCounts c = pv_wake_counts(0);
    report_result("wake_interrupts", c.interrupts);
    report_result("wake_woken", c.woken);
    report_result("wake_spurious", c.spurious);
    report_result("wake_halts_skipped", c.halts_skipped);
  } else if (this_cpu() == 1) {
    g_phase.wait_for(1);
    pv_wake_kick(apic_id_of(0));
    g_phase.store(2);
    g_phase.wait_for(3);
    wait_until_halted(apic_id_of(0));
    pv_wake_kick(apic_id_of(0));
    g_phase.wait_for(4);
    pv_wake_kick(kNoSuchApicId);
    g_phase.store(5);
  }
}

}  // namespace guest
