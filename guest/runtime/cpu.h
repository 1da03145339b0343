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

struct CpuidRegs {
  u32 eax, ebx, ecx, edx;
};
inline CpuidRegs cpuid(u32 leaf, u32 subleaf = 0) {
  CpuidRegs r;
  asm volatile("cpuid" : "=a"(r.eax), "=b"(r.ebx), "=c"(r.ecx), "=d"(r.edx) : "a"(leaf), "c"(subleaf));
  return r;
}

// This vCPU's index, derived from the stack pointer (see kVcpuStackBlockShift):
// no privileged state, no memory access.
u32 this_cpu();

}  // namespace guest
