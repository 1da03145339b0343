// An Intel MultiProcessor table: the MP floating pointer structure and the
// MP configuration table it points to, for kernels that find CPUs and the
// I/O APIC this way.
//
// Format: Intel MultiProcessor Specification, version 1.4 (May 1997),
// chapter 4: floating pointer (4.1, 16 bytes, "_MP_", found by scanning the
// first KiB of the EBDA, the last KiB of base memory or 0xF0000-0xFFFFF),
// configuration table header (4.2, "PCMP"), base entries in this order:
// processor (4.3.1), bus (4.3.2), I/O APIC (4.3.3), I/O interrupt assignment
// (4.3.4), local interrupt assignment (4.3.5).
//
// Debian's linux-image-amd64 has CONFIG_X86_MPPARSE and can use it;
// linux-image-cloud-amd64 does not and relies on ACPI alone. When a kernel
// finds both, ACPI wins: setup_arch() runs acpi_boot_init() before
// get_smp_config(), and default_get_smp_config() (arch/x86/kernel/mpparse.c,
// Linux 6.1) returns without reading the MP table once the MADT gave it
// local APICs and an I/O APIC; with "acpi=off" the kernel uses the MP table. The two must therefore describe the same machine: APIC IDs
// 0..n-1, the I/O APIC (ID n) at 0xFEC00000, ISA IRQs identity-mapped to
// I/O APIC pins, or IRQ 0 on pin 2 with `irq0_to_gsi2`.
#pragma once
#include <cstdint>
#include <vector>

namespace lockvisor::linuxboot {

struct MpTable {
  std::uint64_t base = 0;              // the floating pointer is at base
  std::vector<std::uint8_t> bytes;     // floating pointer, then the configuration table
  std::uint64_t config_addr = 0;
  std::uint32_t config_length = 0;
  unsigned entry_count = 0;
};

// `base` must be 16-byte aligned and inside an area Linux scans
// (kMpTableAddr, 0xF0000). Fails (bad input) for a vCPU count outside
// 1..kMaxAcpiVcpus (the same 8-bit APIC IDs).
MpTable build_mp_table(unsigned vcpu_count, std::uint64_t base, bool irq0_to_gsi2);

}  // namespace lockvisor::linuxboot
