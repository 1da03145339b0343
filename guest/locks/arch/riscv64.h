// riscv64.h: the lock runtime's CPU primitives on RV64 (a Linux process, and
// later the VS-mode guest).  Selected by locks/arch/primitives.h.
#pragma once

namespace lockvisor::locks {

// Spin-wait hint: the Zihintpause `pause` (Linux's cpu_relax on RISC-V does
// the same).  It is FENCE with predecessor set W and an empty successor set,
// which the base ISA reserves as a HINT: a hart without Zihintpause executes
// it as a no-op, so it is safe everywhere.  Emitted by its encoding because
// GCC 12 and its assembler do not know the extension, so they refuse the
// mnemonic; `.insn` (not `.4byte`) keeps it an instruction for disassemblers.
// The "memory" clobber makes it a compiler barrier, like Linux's barrier()
// after the hint.
[[gnu::always_inline]] inline void cpu_relax() {
  asm volatile(".insn i 0x0f, 0, x0, x0, 0x010" ::: "memory");  // pause = 0x0100000f
}

// The lock clock: the `time` CSR (`rdtime`), for locks that bound a wait by
// time (pvbounded.h, cna.h, hq.h).  A constant-rate wall clock shared by all
// harts, readable in U-mode and VS-mode when the more privileged level allows
// it (Linux and KVM both do).  Its rate is the platform's timebase (10 MHz on
// QEMU's `virt` machine; under qemu-user it is the host's TSC), not a CPU
// cycle rate, so every bound is converted with the measured rate of this
// clock, never with a CPU frequency.
[[gnu::always_inline]] inline unsigned long long read_lock_clock() {
  unsigned long long t;
  asm volatile("rdtime %0" : "=r"(t));
  return t;
}

// The lock clock's rate assumed until the run's real rate is known: the
// timebase of QEMU's `virt` machine.  Only the default time bounds before
// set_tuning() use it.
inline constexpr unsigned long long kAssumedLockClockKhz = 10000;

}  // namespace lockvisor::locks
