// Everything the VMM writes before a vCPU's first instruction: page tables,
// GDT, TSSs, the IDT register, the boot-time registers and the CPUID table.
// Layout and entry contract: hypercalls/include/lockvisor/abi/guest_layout.h.
#pragma once
#include <linux/kvm.h>

#include <cstdint>
#include <vector>

#include "vmm/kvm/guest_memory.h"

namespace lockvisor::machine {

struct CpuidOptions {
  bool pv_unhalt = true;   // advertise KVM_FEATURE_PV_UNHALT
  bool dedicated = false;  // advertise KVM_HINTS_REALTIME
  bool steal_time = true;  // advertise KVM_FEATURE_STEAL_TIME
};

// Identity map of all guest memory with 2 MiB pages (U/S = 1), the GDT and
// one TSS per vCPU. Memory size must be a multiple of 2 MiB.
void write_boot_tables(const kvm::GuestMemory& memory, unsigned vcpu_count);

// What the CPU decides for a CPL3 access to `port` (one byte) with IOPL = 0,
// reading the TSS at `tss` as write_boot_tables left it: true when the I/O
// bitmap allows it (exit to the VMM), false when it raises #GP.
bool cpl3_port_allowed(const std::uint8_t* tss, unsigned port);

std::uint64_t kernel_stack_top(std::uint64_t memory_bytes, unsigned index);
std::uint64_t user_stack_top(std::uint64_t memory_bytes, unsigned index);
// Lowest address used by the vCPU stacks.
std::uint64_t stacks_bottom(std::uint64_t memory_bytes, unsigned vcpu_count);

kvm_sregs boot_sregs(kvm_sregs current, unsigned index);
kvm_regs boot_regs(std::uint64_t entry, std::uint64_t memory_bytes, unsigned index);

// KVM's supported CPUID with lockvisor's PV leaves and this vCPU's APIC ID.
std::vector<kvm_cpuid_entry2> guest_cpuid(std::vector<kvm_cpuid_entry2> supported, unsigned apic_id,
                                          const CpuidOptions& options);

}  // namespace lockvisor::machine
