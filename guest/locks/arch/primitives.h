// primitives.h: the one place that picks the lock runtime's CPU primitives
// (cpu_relax, read_lock_clock, kAssumedLockClockKhz) for the compiler's target.
// Everything else in guest/locks is architecture-neutral: its shared-memory
// accesses are the __atomic builtins of locks/atomic.h, which the compiler
// lowers per architecture (x86 locked instructions, RISC-V AMOs and LR/SC).
#pragma once

#if defined(__x86_64__)
#include "locks/arch/x86_64.h"
#elif defined(__riscv) && __riscv_xlen == 64
#include "locks/arch/riscv64.h"
#else
#error "guest/locks has CPU primitives for x86-64 and riscv64 only: add a header for this target to guest/locks/arch/"
#endif
