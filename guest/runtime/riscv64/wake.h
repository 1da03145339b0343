// PV wait and kick on the RV64 guest (the Env's wait/kick, locks/lock_env.h),
// the shape of the SBI PVLOCK series' pv_wait (WFI) with a sticky kick:
//
//   kick(hart): SBI IPI send_ipi to that hart: below the guest, the firmware
//     (or KVM) sets the hart's supervisor software interrupt pending (sip.SSIP;
//     VSSIP under KVM).
//   wait(ptr, val): with sstatus.SIE = 0 (never set: no trap is taken) and
//     sie.SSIE = 1, re-check *ptr == val, WFI, then clear sip.SSIP. WFI ends
//     when an interrupt enabled in sie is pending, whatever sstatus.SIE says.
//
// Why no kick is lost: the pending bit is the latch. A kick that lands after
// the re-check and before the WFI leaves SSIP set, so the WFI returns at once
// (as KVM's pv_unhalted makes the next HLT return). A kick to a hart that is
// not waiting stays pending until its next wait, which then returns at once:
// a spurious return, which every caller tolerates. Clearing after the WFI,
// not before the check, is what keeps an early kick.
//
// This needs SBI IPI only, which OpenSBI and RISC-V KVM both serve in their
// own code. When the kick becomes SBI PVLOCK KICK_CPU, served by lockvisor's
// VMM, the VMM must end this same WFI the same way: leave an interrupt
// pending that the target enables in sie, kept until the target clears it,
// so that the latch stays in the hart and not in the VMM.
#pragma once
#include "lockvisor/abi/types.h"

namespace guest::riscv {
using namespace lockvisor::abi;

inline constexpr u64 kSipSsip = 1u << 1;  // sip/sie bit 1: supervisor software interrupt

// On every hart at start: sie.SSIE = 1 (sstatus.SIE stays 0).
inline void enable_wake_interrupt() { asm volatile("csrs sie, %0" ::"r"(kSipSsip) : "memory"); }

// Returns whether it executed WFI (the halts a test can count).
inline bool wake_wait(volatile u8* ptr, u8 val) {
  if (*ptr != val) return false;
  asm volatile("wfi" ::: "memory");
  asm volatile("csrc sip, %0" ::"r"(kSipSsip) : "memory");
  return true;
}

// Fails the run if SBI refuses (a hart that does not exist).
void wake_kick(unsigned hart);

}  // namespace guest::riscv
