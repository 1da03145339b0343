// The BootInfo (lockvisor/abi/boot_info.h) that lockvisor's RISC-V VMM names
// in the device tree's /chosen node (lockvisor/abi/riscv_boot.h). Its
// presence is what puts the guest in lockvisor mode: the program BootInfo
// names runs on every hart, and the report channel, the console, the kick
// and the trap report go to the VMM (lockvisor_sbi.h, wake.h). Nothing in it
// is trusted before check_boot_info() accepts it.
#pragma once
#include "lockvisor/abi/boot_info.h"
#include "lockvisor/abi/types.h"

namespace guest::riscv {
using namespace lockvisor::abi;

// Why `info` (at guest-physical `address`) cannot be trusted, or nullptr:
// magic, version and size as this image was built with, vcpu_count in
// 1..fdt_harts (the harts the device tree describes; at most
// kRiscvMaxHarts), a NUL-terminated program name.
const char* check_boot_info(u64 address, u32 fdt_harts);

// The accepted BootInfo, from then on; nullptr under firmware (and before).
// runtime/boot.h's boot() reads it too, in lockvisor mode only.
const BootInfo* boot_info();
void set_boot_info(const BootInfo* info);

}  // namespace guest::riscv
