// The RV64 guest's transport under lockvisor's VMM: lockvisor's own SBI
// extension (lockvisor/abi/sbi_lockvisor.h), what the x86 guest sends through
// doorbells. Under firmware (OpenSBI) the extension is absent and the guest
// keeps to the standard SBI calls (sbi.h).
//
// Which transport the console takes is decided once, at boot, by SBI BASE
// probe_extension of kSbiExtLockvisor (RISC-V KVM forwards the probe of an
// experimental EID to the VMM, which answers 1; OpenSBI answers 0).
#pragma once
#include "lockvisor/abi/sbi_lockvisor.h"
#include "lockvisor/abi/types.h"
#include "lockvisor/abi/ucall.h"
#include "runtime/riscv64/sbi.h"

namespace guest::riscv {
using namespace lockvisor::abi;

// Probes kSbiExtLockvisor; on the boot hart, before the first console byte.
void detect_lockvisor_sbi();
// Whether the VMM below serves lockvisor's extension.
bool lockvisor_sbi();

// One console byte (kLvSbiPutchar); the VMM prints a hart's bytes a line at a time.
void lv_putchar(char c);
// The report channel: the address of a filled Ucall (kLvSbiUcall). Paging is
// off, so the address is guest-physical, as the VMM needs it.
void lv_ucall(const Ucall* ucall);
// This hart's WFI returned: the VMM clears its kick latch (kLvSbiKickAck).
void lv_kick_ack();
// Whether `hart` is blocked in WFI right now (kLvSbiQueryHalted): value 1
// or 0, or an error.
SbiRet lv_query_halted(unsigned hart);
// An unexpected trap (kLvSbiTrap): the VMM names it and ends the run. Spins
// if the call ever returns.
[[noreturn]] void lv_trap(u64 scause, u64 sepc, u64 stval);

}  // namespace guest::riscv
