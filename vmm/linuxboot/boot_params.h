// The "zero page": struct boot_params, the 4 KiB block whose address the
// 64-bit entry point receives in RSI.
//
// Format: Documentation/arch/x86/zero-page.rst (offsets of the fields below)
// and Documentation/arch/x86/boot.rst (the setup header at 0x1F1, copied from
// the kernel file, and which of its fields the boot loader must write:
// type_of_loader, loadflags, heap_end_ptr, ramdisk_image/size,
// cmd_line_ptr; since protocol 2.14 acpi_rsdp_addr). Everything not written
// here is zero, as the protocol requires of an unused field.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "vmm/linuxboot/bzimage.h"
#include "vmm/linuxboot/linux_layout.h"

namespace lockvisor::linuxboot {

inline constexpr std::size_t kBootParamsBytes = 4096;
// zero-page.rst offsets.
inline constexpr std::size_t kBpAcpiRsdpAddr = 0x070;     // u64, protocol 2.14+
inline constexpr std::size_t kBpExtRamdiskImage = 0x0C0;  // u32, high half of ramdisk_image
inline constexpr std::size_t kBpExtRamdiskSize = 0x0C4;
inline constexpr std::size_t kBpExtCmdLinePtr = 0x0C8;
inline constexpr std::size_t kBpE820Entries = 0x1E8;      // u8
inline constexpr std::size_t kBpE820Table = 0x2D0;        // 128 x {u64 addr, u64 size, u32 type}
inline constexpr std::size_t kBpE820Max = 128;
inline constexpr std::size_t kBpE820EntryBytes = 20;
// boot.rst setup-header offsets (the same in the file and in boot_params).
inline constexpr std::size_t kBpTypeOfLoader = 0x210;     // u8
inline constexpr std::size_t kBpLoadflags = 0x211;        // u8
inline constexpr std::size_t kBpRamdiskImage = 0x218;     // u32
inline constexpr std::size_t kBpRamdiskSize = 0x21C;      // u32
inline constexpr std::size_t kBpHeapEndPtr = 0x224;       // u16
inline constexpr std::size_t kBpCmdLinePtr = 0x228;       // u32

// "Undefined" boot loader: the kernel's value for an ID it was not assigned.
inline constexpr std::uint8_t kTypeOfLoaderUndefined = 0xFF;
// heap_end_ptr: the real-mode heap ends at 0xFE00 past the setup code, the
// value boot.rst suggests; the 64-bit entry never runs the setup code, so
// only its plausibility matters.
inline constexpr std::uint16_t kHeapEndPtr = 0xFE00;

struct BootParamsInput {
  std::uint64_t cmdline_addr = 0;
  std::uint64_t initrd_addr = 0;  // 0 with no initrd
  std::uint64_t initrd_size = 0;
  std::uint64_t rsdp_addr = 0;    // 0: not set (the kernel then scans 0xE0000-0xFFFFF)
  std::vector<E820Entry> e820;
};

std::vector<std::uint8_t> build_boot_params(const BzImage& kernel, const BootParamsInput& input);

// The command line as written to guest memory, with its terminating NUL.
// Fails (bad input) when it is longer than the kernel's cmdline_size (or
// the kCmdlineRegionBytes the layout gives it) or contains a NUL byte.
std::vector<std::uint8_t> command_line_bytes(const BzImage& kernel, std::string_view cmdline);

}  // namespace lockvisor::linuxboot
