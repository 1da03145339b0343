// The facts the RV64 guest reads from the device tree the SBI boot protocol
// hands it in a1 (Devicetree Specification v0.4, "Flattened Devicetree (DTB)
// Format"):
//   - /cpus/timebase-frequency: the rate of the `time` CSR, the lock clock;
//     a VMM that boots this guest must pass it;
//   - the harts: the nodes under /cpus named cpu@N;
//   - /chosen/lockvisor,boot-info (lockvisor/abi/riscv_boot.h): one u64, the
//     address of the BootInfo lockvisor's VMM wrote; absent under firmware.
#pragma once
#include "lockvisor/abi/types.h"

namespace guest::riscv {
using namespace lockvisor::abi;

struct FdtFacts {
  u64 timebase_hz;      // 0: absent (or not a device tree)
  u32 harts;            // cpu@N nodes under /cpus
  bool has_boot_info;   // the /chosen property is there (its size may still be wrong)
  bool boot_info_valid;  // ... and is exactly one u64
  u64 boot_info;        // its value when valid
};

// Everything zero/false when the blob is not a device tree.
FdtFacts fdt_read(const void* dtb);

}  // namespace guest::riscv
