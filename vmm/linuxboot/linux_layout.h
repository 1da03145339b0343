// Where a Linux guest's boot data lives in guest-physical memory, and the
// memory map (e820) the kernel is given.
//
// Guest RAM is one block from address 0, at most kMaxMemoryBytes, so that it
// stays below the 32-bit MMIO hole that holds the I/O APIC (0xFEC00000) and
// the local APICs (0xFEE00000); a VMM that wants more would have to split RAM
// around the hole (and describe the part above 4 GiB in e820), which this
// layout does not do. The fixed addresses, all below 1 MiB:
//
//   0x00000-0x00FFF  untouched (real-mode IVT and BIOS data area, left zero)
//   0x01000          GDT (the boot protocol's __BOOT_CS 0x10 / __BOOT_DS 0x18)
//   0x07000          boot_params, the "zero page" (4 KiB)
//   0x08000-0x08FFF  boot stack (nothing written; RSP starts at its top)
//   0x09000          PML4, 0x0A000 PDPT, 0x0B000-0x0EFFF four page directories
//   0x20000          kernel command line (NUL-terminated, <= 64 KiB)
//   0x9FC00-0xFFFFF  reserved in e820 (EBDA, VGA hole, BIOS area); in it:
//   0xE0000          ACPI RSDP, then the other ACPI tables (ACPI 6.x, 5.2.5.1:
//                    the RSDP must be found in 0xE0000-0xFFFFF by a scan on
//                    machines without UEFI, kernels before protocol 2.14 scan)
//   0xF0000          Intel MP floating pointer, then the MP configuration table
//                    (MP spec 1.4, 4.1: the BIOS ROM area 0xF0000-0xFFFFF)
//   1 MiB - end      RAM: the kernel at its preferred address (16 MiB for
//                    Debian), the initrd as high as the kernel allows.
//
// Sources: Documentation/arch/x86/boot.rst ("Details of header fields",
// "64-bit boot protocol"), Documentation/arch/x86/zero-page.rst.
#pragma once
#include <cstdint>
#include <vector>

#include "vmm/linuxboot/bzimage.h"

namespace lockvisor::linuxboot {

inline constexpr std::uint64_t kGdtAddr = 0x1000;
inline constexpr std::uint64_t kBootParamsAddr = 0x7000;
inline constexpr std::uint64_t kBootStackTop = 0x9000;
inline constexpr std::uint64_t kPml4Addr = 0x9000;
inline constexpr std::uint64_t kPdptAddr = 0xA000;
inline constexpr std::uint64_t kPdAddr = 0xB000;  // 4 consecutive page directories
inline constexpr std::uint64_t kCmdlineAddr = 0x20000;
inline constexpr std::uint64_t kCmdlineRegionBytes = 0x10000;
inline constexpr std::uint64_t kEbdaStart = 0x9FC00;
inline constexpr std::uint64_t kHighMemoryStart = 0x100000;  // 1 MiB
inline constexpr std::uint64_t kAcpiAddr = 0xE0000;           // RSDP first
inline constexpr std::uint64_t kAcpiRegionBytes = 0x10000;
inline constexpr std::uint64_t kMpTableAddr = 0xF0000;        // floating pointer first
inline constexpr std::uint64_t kMpRegionBytes = 0x10000;
// The boot stack's page, 0x8000-0x8FFF, lies between boot_params and the PML4.
static_assert(kBootParamsAddr + 0x1000 <= kBootStackTop - 0x1000 && kBootStackTop <= kPml4Addr);

// 3 GiB: RAM ends where the last GiB below 4 GiB (MMIO: I/O APIC, LAPIC,
// and room for a VMM's devices) begins.
inline constexpr std::uint64_t kMaxMemoryBytes = 3ull << 30;
inline constexpr std::uint64_t kPageBytes = 4096;
// Where a relocatable kernel goes when its pref_address is not usable.
inline constexpr std::uint64_t kDefaultKernelAddr = 16ull << 20;

// e820 entry types (ACPI 6.x, 15 "System Address Map Interfaces").
enum class E820Type : std::uint32_t { kRam = 1, kReserved = 2, kAcpi = 3, kNvs = 4 };

struct E820Entry {
  std::uint64_t addr = 0;
  std::uint64_t size = 0;
  E820Type type = E820Type::kRam;
  bool operator==(const E820Entry&) const = default;
};

// RAM below the EBDA, the reserved legacy area, RAM from 1 MiB to the end.
std::vector<E820Entry> e820_map(std::uint64_t memory_bytes);

struct KernelPlacement {
  std::uint64_t addr = 0;       // where the payload is copied; 64-bit entry = addr + 0x200
  std::uint64_t footprint = 0;  // max(init_size, payload size): [addr, addr + footprint) is the kernel's
  std::uint64_t end() const { return addr + footprint; }
};

// The load address: pref_address when it is at or above 1 MiB (and, for a
// relocatable kernel, aligned to kernel_alignment), else 16 MiB rounded up
// to kernel_alignment for a relocatable kernel; a kernel that is not
// relocatable must be loaded at its pref_address. Fails (bad input) when
// memory_bytes cannot hold the kernel's init_size there.
KernelPlacement place_kernel(const BzImage& kernel, std::uint64_t memory_bytes);

// The initrd's address: page-aligned, as high as possible with its last byte
// at or below initrd_addr_max and inside RAM, and not overlapping the
// kernel's footprint (then below the kernel, but above 1 MiB, if it does not
// fit above). Fails (bad input) naming the sizes when it fits nowhere.
std::uint64_t place_initrd(const BzImage& kernel, const KernelPlacement& placed, std::uint64_t initrd_size,
                           std::uint64_t memory_bytes);

// Fails (bad input) unless 0 < memory_bytes <= kMaxMemoryBytes and it is a
// whole number of 4 KiB pages.
void check_memory_size(std::uint64_t memory_bytes);

}  // namespace lockvisor::linuxboot
