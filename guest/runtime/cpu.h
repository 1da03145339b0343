// CPU-level helpers for CPL3 guest code.
#pragma once
#include "lockvisor/abi/guest_layout.h"
#include "lockvisor/abi/types.h"

namespace guest {
using namespace lockvisor::abi;

inline u64 rdtsc() {
  u32 lo, hi;
  asm volatile("rdtsc" : "=a"(lo), "=d"(hi));
  return (u64{hi} << 32) | lo;
}

inline void cpu_relax() { asm volatile("pause" ::: "memory"); }

// No `cpuid` here: at CPL3 it is unreliable on PVM (runtime/cpuid_snapshot.h).

// RFLAGS as CPL3 sees it (pushf is harmless at any IOPL outside VM86 mode).
inline u64 read_rflags() {
  u64 flags;
  asm volatile("pushfq; popq %0" : "=r"(flags));
  return flags;
}

// This vCPU's index, derived from the stack pointer (see kVcpuStackBlockShift):
// no privileged state, no memory access.
u32 this_cpu();

}  // namespace guest
