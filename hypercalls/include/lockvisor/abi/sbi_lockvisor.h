// lockvisor's own SBI extension: the RISC-V transport of what the x86 guest
// sends through doorbells (doorbell.h) — the report channel (port 0xE6), the
// console (COM1), the exception report (port 0xE7), QUERY_HALTED — and the
// acknowledgement that ends a sticky PVLOCK kick.
//
// It lives in the experimental EID range because that is what RISC-V KVM
// forwards to a userspace VMM (KVM_EXIT_RISCV_SBI); SBI BASE probe_extension
// of an experimental EID is forwarded too, so the guest finds out whether it
// runs under lockvisor's VMM (answer 1) or under firmware (OpenSBI: 0).
//
// Register convention (SBI v1.0): a7 = EID, a6 = FID, a0..a5 = arguments;
// the answer is a0 = sbiret.error, a1 = sbiret.value.
#pragma once
#include "lockvisor/abi/types.h"

namespace lockvisor::abi {

// "\x08LVC": lockvisor calls. Distinct from the PVLOCK alias (sbi_pvlock.h).
inline constexpr u32 kSbiExtLockvisor = 0x084C5643;

// a0 = guest-physical address of a struct Ucall (ucall.h). Answer: error 0.
// Exactly the report channel of port 0xE6: every address and length checked.
inline constexpr u32 kLvSbiUcall = 0;
// a0 = one byte of console output. Printed per hart, a whole line at a time,
// as COM1 is on x86. Answer: error 0.
inline constexpr u32 kLvSbiPutchar = 1;
// The calling hart's WFI has returned: the VMM clears that hart's latch and
// lowers the interrupt. Answer: error 0, value 1 if a kick was latched (the
// kick ended this wait), 0 if not (the WFI returned for another reason).
// See kRiscvKickInterrupt for the protocol.
inline constexpr u32 kLvSbiKickAck = 2;
// a0 = hart id. Answer: value 1 if that hart is blocked in WFI inside KVM
// right now, 0 if not; error kSbiErrInvalidParam for a hart that does not
// exist, kSbiErrNotSupported when the host kernel cannot tell. A test aid,
// as QUERY_HALTED on x86: a case waits until its peer really sleeps.
inline constexpr u32 kLvSbiQueryHalted = 3;
// A trap the guest did not expect: a0 = scause, a1 = sepc, a2 = stval.
// Never returns: the VMM names the trap and ends the run (exit code 3).
inline constexpr u32 kLvSbiTrap = 4;

// The interrupt that carries a sticky PVLOCK kick: the supervisor external
// interrupt (sip/sie bit 9), raised by the VMM with KVM_INTERRUPT.
//
//   kick (sticky): the VMM sets the target's latch and raises the target's
//     external interrupt (KVM_INTERRUPT_SET). RISC-V KVM blocks a WFI only
//     while no interrupt enabled in sie is pending, so a WFI after the kick
//     returns at once and a blocked one wakes.
//   wait: the guest runs with sie.SEIE = 1 and sstatus.SIE = 0 (the interrupt
//     never traps), re-checks its condition, WFI, then calls kLvSbiKickAck,
//     on which the VMM clears the latch and lowers the line
//     (KVM_INTERRUPT_UNSET). Kick and acknowledgement are serialised per hart
//     in the VMM, so a kick never falls between the clear and the lowering.
//     The acknowledgement follows every WFI, not only one that sees sip.SEIP:
//     under QEMU 7.2's emulated H extension a VS-mode read of sip shows SEIP
//     as 0 even while KVM's pending external interrupt is ending the WFI
//     (measured in tools/nested-riscv, with sie.SEIE = 1), so the guest cannot
//     tell. Clearing at the end of every wait is what KVM's pv_unhalted does
//     on x86 (cleared when a halt ends, whatever ended it): a kick that lands
//     between the WFI's return and the acknowledgement is consumed with it,
//     and nothing is lost, because a kicker always changes the state a waiter
//     re-checks before it kicks, and the waiter re-checks before every WFI.
//   kick (proposed, the series' own host side): nothing latched; the VMM only
//     takes the target out of KVM_RUN. A target blocked in WFI returns from
//     it; one that is running loses the kick.
inline constexpr u32 kRiscvKickInterrupt = 9;

}  // namespace lockvisor::abi
