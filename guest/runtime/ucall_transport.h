// How the report channel (runtime/ucall_report.cpp) reaches the VMM, per
// architecture: which CPU's slot a message uses, how one is sent (one exit
// each), and how a CPU sends its last message (DONE or a failed check), after
// which the VMM does not resume it.
//   x86-64: the ucall doorbell (port 0xE6, runtime/doorbell.h); the last
//     message is rung again and again, should the VMM ever resume the vCPU.
//   riscv64: lockvisor's SBI call kLvSbiUcall (runtime/riscv64/lockvisor_sbi.h);
//     after the last message the hart spins with the spin-wait hint, never
//     WFI: under lockvisor the only WFI the image executes is the PV wait's,
//     so that the VMM's count of WFI exits is the guest's count of halts.
#pragma once
#include "lockvisor/abi/ucall.h"

#if defined(__x86_64__)
#include "runtime/cpu.h"
#include "runtime/doorbell.h"

namespace guest {
inline unsigned ucall_cpu() { return this_cpu(); }
inline void ucall_send(const Ucall* u) { ucall_doorbell(u); }
[[noreturn]] inline void ucall_last(const Ucall* u) {
  for (;;) ucall_doorbell(u);
}
}  // namespace guest

#elif defined(__riscv) && __riscv_xlen == 64
#include "locks/atomic.h"
#include "runtime/riscv64/hart.h"
#include "runtime/riscv64/lockvisor_sbi.h"

namespace guest {
inline unsigned ucall_cpu() { return riscv::this_hart(); }
inline void ucall_send(const Ucall* u) { riscv::lv_ucall(u); }
[[noreturn]] inline void ucall_last(const Ucall* u) {
  riscv::lv_ucall(u);
  for (;;) lockvisor::locks::cpu_relax();
}
}  // namespace guest

#else
#error "the report channel has no transport for this architecture: add one to runtime/ucall_transport.h"
#endif
