// A Linux x86 "bzImage" kernel file, parsed and validated.
//
// Format: the Linux x86 boot protocol, Documentation/arch/x86/boot.rst in the
// Linux source (section "The real-mode kernel header" for the field offsets,
// "64-bit boot protocol" for the entry lockvisor uses). The file is the
// real-mode setup code, (setup_sects + 1) sectors of 512 bytes whose first
// sector carries the setup header at 0x1F1, followed by the protected-mode
// payload (the compressed kernel with its decompressor), which the boot
// loader copies unchanged to the load address. lockvisor enters it at the
// 64-bit entry point, load address + 0x200, which needs protocol 2.12 (the
// first with `xloadflags`) and XLF_KERNEL_64.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace lockvisor::linuxboot {

// Offsets in the file (and in boot_params, which embeds the same header).
inline constexpr std::size_t kSetupHeaderOffset = 0x1F1;
inline constexpr std::size_t kBootFlagOffset = 0x1FE;   // u16 0xAA55
inline constexpr std::size_t kJumpOffset = 0x200;       // 2-byte short jump; its 2nd byte gives the header end
inline constexpr std::size_t kHeaderMagicOffset = 0x202;  // "HdrS"
// boot_params reserves 0x1F1..0x290 for the header (then edd_mbr_sig_buffer).
inline constexpr std::size_t kSetupHeaderLimit = 0x290;

inline constexpr std::uint16_t kMinProtocol = 0x020C;        // 2.12: xloadflags
inline constexpr std::uint16_t kProtocolAcpiRsdp = 0x020E;   // 2.14: boot_params.acpi_rsdp_addr

// xloadflags bits.
inline constexpr std::uint16_t kXlfKernel64 = 1u << 0;             // has the 64-bit entry at +0x200
inline constexpr std::uint16_t kXlfCanBeLoadedAbove4G = 1u << 1;
// loadflags bits.
inline constexpr std::uint8_t kLoadedHigh = 1u << 0;
inline constexpr std::uint8_t kCanUseHeap = 1u << 7;

struct BzImage {
  std::uint16_t protocol = 0;          // major << 8 | minor, e.g. 0x020F for 2.15
  unsigned setup_sects = 0;            // effective count (a 0 in the file means 4)
  std::size_t payload_offset = 0;      // (setup_sects + 1) * 512
  std::size_t payload_size = 0;        // file size - payload_offset: the bytes to load
  std::uint8_t loadflags = 0;
  std::uint16_t xloadflags = 0;
  bool relocatable = false;
  std::uint32_t kernel_alignment = 0;
  std::uint64_t pref_address = 0;
  std::uint32_t init_size = 0;         // bytes the kernel needs from its load address while it boots
  std::uint32_t cmdline_size = 0;      // longest command line, without the terminating NUL
  std::uint32_t initrd_addr_max = 0;   // highest address the last initrd byte may occupy
  // The setup header as it is in the file, 0x1F1 .. 0x202 + byte[0x201]:
  // the boot loader copies it into boot_params and then fills its own fields.
  std::vector<std::uint8_t> setup_header;

  std::span<const std::uint8_t> payload(std::span<const std::uint8_t> file) const {
    return file.subspan(payload_offset, payload_size);
  }
};

// Parses `file`; `name` (the path) only appears in error messages. Fails
// with fail() (bad input, exit 2) naming what the file is instead when it is
// not a usable bzImage: empty, an ELF file, too short, no "HdrS" header,
// truncated, a boot protocol older than 2.12, or no 64-bit entry point.
BzImage parse_bzimage(std::span<const std::uint8_t> file, std::string_view name);

}  // namespace lockvisor::linuxboot
