// PV wait and kick on the RV64 guest (the Env's wait/kick, locks/lock_env.h),
// the shape of the SBI PVLOCK series' pv_wait (WFI) with a sticky kick. The
// guest never takes an interrupt: sstatus.SIE stays 0, and a pending
// interrupt enabled in sie only ends a WFI (it does so whatever sstatus.SIE
// says). The latch is an interrupt-pending bit, kept until the waiter has
// seen it, so no kick is lost: a kick that lands after the re-check and
// before the WFI leaves the bit set and the WFI returns at once (as KVM's
// pv_unhalted makes the next HLT return). A kick to a hart that is not
// waiting stays pending until its next wait, which then returns at once: a
// spurious return, which every caller tolerates. Two transports:
//
// Under firmware (OpenSBI; no BootInfo):
//   kick(hart): SBI IPI send_ipi: the firmware sets the hart's supervisor
//     software interrupt pending (sip.SSIP).
//   wait(ptr, val): sie.SSIE = 1; re-check *ptr == val, WFI, then clear
//     sip.SSIP. Clearing after the WFI, not before the check, is what keeps
//     an early kick.
//
// Under lockvisor's VMM (kRiscvKickInterrupt in lockvisor/abi/sbi_lockvisor.h
// has the protocol):
//   kick(hart): SBI PVLOCK KICK_CPU (FID 0, a0 = hart) at the EID BootInfo
//     names (sbi_experimental_eid), served when kBootFlagSbiPvlock is set.
//     Sticky, the VMM latches it and raises the hart's supervisor external
//     interrupt (sip.SEIP); proposed (the series' own host side), it only
//     takes the hart out of KVM_RUN, and a kick before the WFI is lost.
//   wait(ptr, val): sie.SEIE = 1; re-check, WFI, then kLvSbiKickAck after
//     every WFI: the VMM clears its latch and lowers the interrupt (the guest
//     cannot clear an external interrupt itself, nor, under QEMU's emulated
//     H extension, see it in sip: sbi_lockvisor.h says why that is safe).
// The WFI in wake_wait is the only one the image executes under lockvisor,
// so that the VMM's count of WFI exits equals the guest's count of halts.
#pragma once
#include "lockvisor/abi/sbi_lockvisor.h"
#include "lockvisor/abi/types.h"
#include "runtime/riscv64/lockvisor_sbi.h"

namespace guest::riscv {
using namespace lockvisor::abi;

inline constexpr u64 kSipSsip = u64{1} << 1;                    // supervisor software interrupt
inline constexpr u64 kSipSeip = u64{1} << kRiscvKickInterrupt;  // supervisor external interrupt

// Which kick this guest uses; set on the boot hart before the others start.
extern bool g_kick_via_pvlock;  // true under lockvisor; false: SBI IPI (firmware)
extern u32 g_pvlock_eid;        // the PVLOCK EID when g_kick_via_pvlock

// Under lockvisor: kicks are KICK_CPU at `eid` (BootInfo's; the VMM serves
// it when kBootFlagSbiPvlock is set), wakes come through the supervisor
// external interrupt (sie.SEIE).
void use_pvlock_kick(u32 eid);

// On every hart at start: enables the wake interrupt of this guest's kick
// in sie (sstatus.SIE stays 0).
inline void enable_wake_interrupt() {
  const u64 bit = g_kick_via_pvlock ? kSipSeip : kSipSsip;
  asm volatile("csrs sie, %0" ::"r"(bit) : "memory");
}

// Returns whether it executed WFI (the halts a test can count).
inline bool wake_wait(volatile u8* ptr, u8 val) {
  if (*ptr != val) return false;
  asm volatile("wfi" ::: "memory");
  if (g_kick_via_pvlock) {
    lv_kick_ack();
  } else {
    asm volatile("csrc sip, %0" ::"r"(kSipSsip) : "memory");
  }
  return true;
}

// SBI PVLOCK KICK_CPU at `eid` to `hart`: the sbiret, whatever it is (the
// conformance program checks the errors).
SbiRet pvlock_kick(u32 eid, u64 hart);

// Fails the run if the kick is refused (a hart that does not exist).
void wake_kick(unsigned hart);

}  // namespace guest::riscv
