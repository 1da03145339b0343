// The CPUID leaves the runtime needs, read at CPL0 by arch/x86/entry.S.
//
// Why not `cpuid` at CPL3: on PVM hosts it is answered by the outer
// hypervisor with the host's own view (PV_UNHALT set even with --no-pv, the
// host CPU's APIC ID), not the table the VMM installed with KVM_SET_CPUID2.
// At CPL0 every KVM returns exactly that table. The entry code stores this
// structure at the top of each vCPU's user stack (offsets fixed there).
#pragma once
#include "lockvisor/abi/types.h"

namespace guest {
using namespace lockvisor::abi;

struct CpuidLeaf {
  u32 eax, ebx, ecx, edx;
};

struct Cpl0Cpuid {
  CpuidLeaf signature;  // 0x40000000: "KVMKVMKVM\0\0\0", EAX = highest leaf
  CpuidLeaf features;   // 0x40000001: EAX = PV features, EDX = hints
  CpuidLeaf basic;      // 1: EBX[31:24] = this vCPU's APIC ID (its low byte)
  CpuidLeaf topology;   // 0xB subleaf 0: EDX = this vCPU's x2APIC ID (all 32 bits)
};
static_assert(sizeof(Cpl0Cpuid) == 64, "offsets are hard-coded in arch/x86/entry.S (CPUID_SLOT_BYTES)");

// This vCPU's snapshot (guest_main keeps a copy per vCPU).
const Cpl0Cpuid& cpl0_cpuid();
void set_cpl0_cpuid(u32 cpu, const Cpl0Cpuid& snapshot);

}  // namespace guest
