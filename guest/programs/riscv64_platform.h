// The RV64 guest's Platform for the shared workload code
// (workloads/platform.h), which the smoke test and the lock-workload
// programs run.
#pragma once
#include "lockvisor/abi/types.h"
#include "locks/atomic.h"
#include "runtime/riscv64/hart.h"
#include "workloads/platform.h"

namespace guest::riscv {

// The lock clock: the `time` CSR, at the rate the device tree gave.
struct RiscvPlatform {
  static u64 now() { return lockvisor::locks::read_lock_clock(); }
  static u64 tsc_khz() { return lock_clock_khz(); }
  static u64 ns_to_cycles(u64 ns) { return lockvisor::workloads::ns_to_cycles(ns, tsc_khz()); }
};

}  // namespace guest::riscv
