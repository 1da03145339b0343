#include "vmm/linuxboot/bzimage.h"

#include <algorithm>

#include "vmm/linuxboot/le_bytes.h"
#include "vmm/util/error.h"

namespace lockvisor::linuxboot {
namespace {

// Setup-header field offsets (boot.rst, "The real-mode kernel header").
constexpr std::size_t kSetupSects = 0x1F1;
constexpr std::size_t kSyssize = 0x1F4;  // payload size in 16-byte units (protocol 2.04+)
constexpr std::size_t kVersion = 0x206;
constexpr std::size_t kLoadflags = 0x211;
constexpr std::size_t kInitrdAddrMax = 0x22C;
constexpr std::size_t kKernelAlignment = 0x230;
constexpr std::size_t kRelocatableKernel = 0x234;
constexpr std::size_t kXloadflags = 0x236;
constexpr std::size_t kCmdlineSize = 0x238;
constexpr std::size_t kPrefAddress = 0x258;
constexpr std::size_t kInitSize = 0x260;
// A 2.12 header reaches at least to the end of init_size.
constexpr std::size_t kMinHeaderEnd = kInitSize + 4;

constexpr std::uint32_t kHdrS = 0x53726448;  // "HdrS" read little-endian

std::string protocol_text(std::uint16_t version) {
  return fmt::format("{}.{:02}", version >> 8, version & 0xFF);
}

// Says what a file that is not a bzImage looks like, to make the error useful.
[[noreturn]] void fail_not_a_bzimage(std::span<const std::uint8_t> file, std::string_view name) {
  auto starts_with = [&](std::initializer_list<std::uint8_t> magic) {
    return file.size() >= magic.size() && std::equal(magic.begin(), magic.end(), file.begin());
  };
  if (starts_with({0x7F, 'E', 'L', 'F'}))
    fail("kernel {} is an ELF file (a vmlinux?), not a bzImage: pass the compressed kernel "
         "(arch/x86/boot/bzImage or /boot/vmlinuz-*)", name);
  if (starts_with({0x1F, 0x8B}))
    fail("kernel {} is gzip-compressed data, not a bzImage: pass the kernel itself "
         "(arch/x86/boot/bzImage or /boot/vmlinuz-*)", name);
  if (file.size() >= kBootFlagOffset + 2 && get16(file, kBootFlagOffset) != 0xAA55)
    fail("kernel {} is not a Linux bzImage: no boot flag 0xAA55 at offset 0x1FE (found 0x{:04X}) "
         "and no \"HdrS\" header at 0x202", name, get16(file, kBootFlagOffset));
  fail("kernel {} is not a Linux bzImage: no \"HdrS\" setup header at offset 0x202", name);
}

}  // namespace

BzImage parse_bzimage(std::span<const std::uint8_t> file, std::string_view name) {
  if (file.empty()) fail("kernel {} is empty", name);
  if (file.size() < kHeaderMagicOffset + 4) {
    if (file.size() >= 4 && file[0] == 0x7F && file[1] == 'E' && file[2] == 'L' && file[3] == 'F')
      fail_not_a_bzimage(file, name);
    fail("kernel {} is too short to be a bzImage: {} bytes, the setup header alone needs {}", name,
         file.size(), kMinHeaderEnd);
  }
  if (get32(file, kHeaderMagicOffset) != kHdrS || get16(file, kBootFlagOffset) != 0xAA55)
    fail_not_a_bzimage(file, name);

  BzImage image;
  image.protocol = get16(file, kVersion);
  if (image.protocol < kMinProtocol)
    fail("kernel {} uses boot protocol {}, older than the 2.12 lockvisor needs (64-bit entry point, "
         "Linux 3.8 or later)", name, protocol_text(image.protocol));

  const std::size_t header_end = kHeaderMagicOffset + file[kJumpOffset + 1];
  if (header_end < kMinHeaderEnd || header_end > kSetupHeaderLimit)
    fail("kernel {} has a setup header ending at 0x{:X} (from the jump at 0x200), outside the "
         "0x{:X}..0x{:X} a protocol {} header occupies", name, header_end, kMinHeaderEnd,
         kSetupHeaderLimit, protocol_text(image.protocol));
  if (file.size() < header_end)
    fail("kernel {} is truncated: {} bytes, its setup header ends at 0x{:X}", name, file.size(), header_end);

  image.xloadflags = get16(file, kXloadflags);
  if (!(image.xloadflags & kXlfKernel64))
    fail("kernel {} has no 64-bit entry point (xloadflags 0x{:04X} lacks XLF_KERNEL_64): a 32-bit "
         "kernel? lockvisor boots x86-64 kernels only", name, image.xloadflags);

  image.setup_sects = file[kSetupSects] == 0 ? 4 : file[kSetupSects];
  image.payload_offset = (std::size_t{image.setup_sects} + 1) * 512;
  const std::uint64_t syssize_bytes = std::uint64_t{get32(file, kSyssize)} * 16;
  if (file.size() <= image.payload_offset || file.size() - image.payload_offset < syssize_bytes)
    fail("kernel {} is truncated: the setup header announces {} setup bytes and a {}-byte payload "
         "({} bytes in all), the file has {}", name, image.payload_offset, syssize_bytes,
         image.payload_offset + syssize_bytes, file.size());
  image.payload_size = file.size() - image.payload_offset;

  image.loadflags = file[kLoadflags];
  image.initrd_addr_max = get32(file, kInitrdAddrMax);
  image.kernel_alignment = get32(file, kKernelAlignment);
  image.relocatable = file[kRelocatableKernel] != 0;
  image.cmdline_size = get32(file, kCmdlineSize);
  image.pref_address = get64(file, kPrefAddress);
  image.init_size = get32(file, kInitSize);
  if (image.relocatable && (image.kernel_alignment == 0 || (image.kernel_alignment & (image.kernel_alignment - 1))))
    fail("kernel {} asks for kernel_alignment 0x{:X}, not a power of two", name, image.kernel_alignment);
  image.setup_header.assign(file.begin() + kSetupHeaderOffset, file.begin() + header_end);
  return image;
}

}  // namespace lockvisor::linuxboot
