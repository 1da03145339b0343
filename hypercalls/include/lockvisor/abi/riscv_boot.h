// The RV64 guest image's boot contract (guest/arch/riscv64/entry.S), what a
// loader must honour: OpenSBI's fw_dynamic for `qemu -kernel`, and
// lockvisor's RISC-V VMM.
//
//   * The image is linked to run at kRiscvImageBase (an ELF64 executable with
//     one loadable text+data range; .bss follows it and is zeroed by the
//     guest itself). It is not position-independent: its data holds absolute
//     addresses (the lock registry's names, string tables), so a loader must
//     place it exactly there. It stops with a named error if it was not.
//   * Entry at the ELF entry point in S-mode (VS-mode under KVM), paging off
//     (satp = 0), interrupts off (sstatus.SIE = 0), with a0 = this hart's id
//     and a1 = the device tree's address (the SBI boot protocol). The guest
//     reads /cpus/timebase-frequency (the rate of the `time` CSR, its lock
//     clock), counts the cpu@N nodes under /cpus, and reads /chosen (below).
//   * One hart enters first; the guest starts the others itself with SBI HSM
//     hart_start at the same entry point (sbi_pvlock.h). Hart ids must be
//     below kRiscvMaxHarts and contiguous from 0. Under lockvisor's VMM the
//     first is hart 0, and with a BootInfo the guest refuses any other
//     (kRiscvBootHartMessage), since its programs give hart 0 its own role.
//   * SBI services it needs from the firmware or the VMM: BASE, HSM, IPI,
//     SRST and the legacy console putchar (sbi_pvlock.h).
//   * Under lockvisor's VMM the device tree's /chosen node has the property
//     kRiscvBootInfoProperty (one u64, big-endian as every FDT cell): the
//     address of a BootInfo (boot_info.h), which names the program to run and
//     its settings. Without it (firmware boot) the guest runs its smoke test.
//     The VMM also answers lockvisor's SBI extension (sbi_lockvisor.h).
#pragma once
#include "lockvisor/abi/guest_layout.h"
#include "lockvisor/abi/types.h"

namespace lockvisor::abi {

// Guest RAM starts here, as on QEMU's `virt` machine.
inline constexpr u64 kRiscvRamBase = 0x80000000;

// Where lockvisor's VMM puts the flattened device tree (a1 at entry) and
// the BootInfo, both below the image: RAM the image never uses.
inline constexpr u64 kRiscvFdtGpa = kRiscvRamBase;
inline constexpr u64 kRiscvFdtMaxBytes = 0x10000;
inline constexpr u64 kRiscvBootInfoGpa = kRiscvRamBase + 0x100000;
// What the guest prints (after "FAIL: hart N: ") when a BootInfo is named and
// a hart other than 0 entered first.
inline constexpr char kRiscvBootHartMessage[] = "with a BootInfo, hart 0 must enter first";

// The /chosen property that holds kRiscvBootInfoGpa.
inline constexpr char kRiscvBootInfoProperty[] = "lockvisor,boot-info";

// 2 MiB into RAM on QEMU's `virt` machine (RAM at 0x80000000): where OpenSBI's
// fw_dynamic puts the next stage. The build reads this line (the linker
// script gets it from guest/arch/riscv64/CMakeLists.txt).
inline constexpr u64 kRiscvImageBase = 0x80200000;

// Hart ids 0..kRiscvMaxHarts-1 get a stack. Fewer than x86's kMaxVcpus:
// every hart is a cpu node of the device tree, which must fit
// kRiscvFdtMaxBytes (tests/arch/fdt_writer_test.cpp builds the largest), and
// each hart's stack lies in the image's .bss. At most as many as the lock
// runtime has CPUs (locks::kMaxCpus = kMaxVcpus).
inline constexpr u32 kRiscvMaxHarts = 256;
static_assert(kRiscvMaxHarts <= kMaxVcpus, "every hart is a CPU of the lock runtime");

static_assert(kRiscvFdtGpa + kRiscvFdtMaxBytes <= kRiscvBootInfoGpa, "the device tree overlaps BootInfo");
static_assert(kRiscvBootInfoGpa + kBootInfoBytes <= kRiscvImageBase, "BootInfo overlaps the image");

}  // namespace lockvisor::abi
