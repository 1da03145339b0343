// The RV64 guest image's boot contract (guest/arch/riscv64/entry.S), what a
// loader must honour: OpenSBI's fw_dynamic for `qemu -kernel` today,
// lockvisor's RISC-V VMM later.
//
//   * The image is linked to run at kRiscvImageBase (an ELF64 executable with
//     one loadable text+data range; .bss follows it and is zeroed by the
//     guest itself). It is not position-independent: its data holds absolute
//     addresses (the lock registry's names, string tables), so a loader must
//     place it exactly there. It stops with a named error if it was not.
//   * Entry at the ELF entry point in S-mode (VS-mode under KVM), paging off
//     (satp = 0), interrupts off (sstatus.SIE = 0), with a0 = this hart's id
//     and a1 = the device tree's address (the SBI boot protocol). The guest
//     reads one property of it, /cpus/timebase-frequency: the rate of the
//     `time` CSR, its lock clock.
//   * One hart enters first; the guest starts the others itself with SBI HSM
//     hart_start at the same entry point (sbi_pvlock.h). Hart ids must be
//     below kRiscvMaxHarts and contiguous from 0.
//   * SBI services it needs from the firmware or the VMM: BASE, HSM, IPI,
//     SRST and the legacy console putchar (sbi_pvlock.h).
#pragma once
#include "lockvisor/abi/guest_layout.h"
#include "lockvisor/abi/types.h"

namespace lockvisor::abi {

// 2 MiB into RAM on QEMU's `virt` machine (RAM at 0x80000000): where OpenSBI's
// fw_dynamic puts the next stage. The build reads this line (the linker
// script gets it from guest/arch/riscv64/CMakeLists.txt).
inline constexpr u64 kRiscvImageBase = 0x80200000;

// Hart ids 0..kRiscvMaxHarts-1 get a stack; as many as the lock runtime has
// CPUs (locks::kMaxCpus).
inline constexpr u32 kRiscvMaxHarts = kMaxVcpus;

}  // namespace lockvisor::abi
