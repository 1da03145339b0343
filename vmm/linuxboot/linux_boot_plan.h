// Everything a VMM writes into guest memory to boot an unmodified x86-64
// Linux bzImage, and the boot CPU's entry state, computed and validated
// from bytes before any KVM object exists.
//
// The plan follows the 64-bit boot protocol (Documentation/arch/x86/boot.rst)
// with the layout of vmm/linuxboot/linux_layout.h: boot_params, command line, GDT,
// identity page tables, ACPI tables (vmm/linuxboot/acpi_tables.h) and an MP table
// (vmm/linuxboot/mp_table.h) below 1 MiB, the kernel payload at its load address
// and the initrd as high as the kernel allows. The VMM copies each write to
// guest memory (RAM from address 0, `memory_bytes` long, otherwise zero),
// applies `bsp` to vCPU 0 (vmm/linuxboot/kvm_entry.h), leaves the other vCPUs in
// KVM's reset state for the kernel to start with INIT/SIPI, and watches the
// `power` ports for power-off and reset.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/linuxboot/acpi_tables.h"
#include "vmm/linuxboot/bzimage.h"
#include "vmm/linuxboot/linux_layout.h"
#include "vmm/linuxboot/x86_entry.h"

namespace lockvisor::linuxboot {

// The most vCPUs a plan describes (APIC IDs 0..n-1 in the MADT and MP table).
inline constexpr unsigned kMaxVcpus = kMaxAcpiVcpus;

struct LinuxBootOptions {
  AcpiOptions acpi;
  bool mp_table = true;  // also write an MP table (for kernels with X86_MPPARSE and acpi=off)
};

struct LinuxBootInput {
  std::span<const std::uint8_t> kernel;  // the bzImage file's bytes
  std::string kernel_name;               // for messages (the path)
  std::optional<std::span<const std::uint8_t>> initrd;
  std::string initrd_name;
  std::string cmdline;
  std::uint64_t memory_bytes = 0;
  unsigned vcpu_count = 1;
  LinuxBootOptions options;
};

// One copy into guest memory. Tables are owned by the write; the kernel
// payload and the initrd refer to the input's bytes, which must outlive the
// plan.
struct MemoryWrite {
  std::uint64_t gpa = 0;
  std::string what;  // "boot_params", "kernel", "initrd", "ACPI tables", ...
  std::vector<std::uint8_t> owned;
  std::span<const std::uint8_t> borrowed;
  std::span<const std::uint8_t> bytes() const { return owned.empty() ? borrowed : std::span(owned); }
  std::uint64_t end() const { return gpa + bytes().size(); }
};

struct LinuxBootPlan {
  std::vector<MemoryWrite> writes;  // sorted by gpa, pairwise disjoint, all inside RAM
  EntryState bsp;
  BzImage kernel;
  std::vector<E820Entry> e820;
  KernelPlacement kernel_placement;
  std::uint64_t initrd_addr = 0;  // 0 without an initrd
  std::uint64_t initrd_size = 0;
  std::uint64_t rsdp_addr = 0;
  std::uint64_t mp_table_addr = 0;  // 0 without an MP table
  std::vector<AcpiTableInfo> acpi_tables;
  PowerControl power;
  // The bytes of guest RAM the kernel's init_size and the initrd need at
  // least (the memory_bytes minimum for this kernel and initrd).
  std::uint64_t min_memory_bytes = 0;
};

// Validates everything (kernel, initrd size and placement, command line
// length, memory size, vCPU count 1..kMaxVcpus) and fails with fail() (bad
// input, exit 2) naming the problem; never touches KVM.
LinuxBootPlan plan_linux_boot(const LinuxBootInput& input);

}  // namespace lockvisor::linuxboot
