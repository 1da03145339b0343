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
// The calling hart saw its kick-wake interrupt pending (sip.SEIP) after a
// WFI: the VMM clears that hart's latch and lowers the interrupt. Answer:
// error 0. See kRiscvKickInterrupt for the protocol.
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
//     never traps), WFI, then reads sip.SEIP; if set it calls kLvSbiKickAck,
//     on which the VMM clears the latch and lowers the line
//     (KVM_INTERRUPT_UNSET). Kick and acknowledgement are serialised per hart
//     in the VMM, so a kick never falls between the clear and the lowering.
//   kick (proposed, the series' own host side): nothing latched; the VMM only
//     takes the target out of KVM_RUN. A target blocked in WFI returns from
//     it; one that is running loses the kick.
inline constexpr u32 kRiscvKickInterrupt = 9;

}  // namespace lockvisor::abi
