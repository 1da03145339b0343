// The one fact the RV64 guest reads from the device tree the SBI boot
// protocol hands it in a1: the rate of the `time` CSR, the lock clock
// (/cpus/timebase-frequency; Devicetree Specification v0.4, "Flattened
// Devicetree (DTB) Format"). A VMM that boots this guest must pass a device
// tree with that property.
#pragma once
#include "lockvisor/abi/types.h"

namespace guest::riscv {
using namespace lockvisor::abi;

// /cpus/timebase-frequency in Hz; 0 when the blob is not a device tree or
// lacks it.
u64 fdt_timebase_hz(const void* dtb);

}  // namespace guest::riscv
