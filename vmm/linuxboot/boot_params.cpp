#include "vmm/linuxboot/boot_params.h"

#include <algorithm>

#include "vmm/linuxboot/le_bytes.h"
#include "vmm/util/error.h"

namespace lockvisor::linuxboot {

std::vector<std::uint8_t> build_boot_params(const BzImage& kernel, const BootParamsInput& input) {
  std::vector<std::uint8_t> page(kBootParamsBytes, 0);
  std::copy(kernel.setup_header.begin(), kernel.setup_header.end(), page.begin() + kSetupHeaderOffset);

  put8(page, kBpTypeOfLoader, kTypeOfLoaderUndefined);
  // LOADED_HIGH: the payload is at or above 1 MiB; CAN_USE_HEAP: heap_end_ptr
  // is valid. The kernel's other bits (KASLR, QUIET, KEEP_SEGMENTS) are left
  // as the file has them: they are the kernel's own or the loader's choice.
  put8(page, kBpLoadflags, static_cast<std::uint8_t>(kernel.loadflags | kLoadedHigh | kCanUseHeap));
  put16(page, kBpHeapEndPtr, kHeapEndPtr);

  put32(page, kBpCmdLinePtr, static_cast<std::uint32_t>(input.cmdline_addr));
  put32(page, kBpExtCmdLinePtr, static_cast<std::uint32_t>(input.cmdline_addr >> 32));
  put32(page, kBpRamdiskImage, static_cast<std::uint32_t>(input.initrd_addr));
  put32(page, kBpExtRamdiskImage, static_cast<std::uint32_t>(input.initrd_addr >> 32));
  put32(page, kBpRamdiskSize, static_cast<std::uint32_t>(input.initrd_size));
  put32(page, kBpExtRamdiskSize, static_cast<std::uint32_t>(input.initrd_size >> 32));

  if (input.rsdp_addr != 0 && kernel.protocol >= kProtocolAcpiRsdp) put64(page, kBpAcpiRsdpAddr, input.rsdp_addr);

  if (input.e820.size() > kBpE820Max) fail("e820 map of {} entries, boot_params holds {}", input.e820.size(), kBpE820Max);
  put8(page, kBpE820Entries, static_cast<std::uint8_t>(input.e820.size()));
  for (std::size_t i = 0; i < input.e820.size(); ++i) {
    const std::size_t at = kBpE820Table + i * kBpE820EntryBytes;
    put64(page, at, input.e820[i].addr);
    put64(page, at + 8, input.e820[i].size);
    put32(page, at + 16, static_cast<std::uint32_t>(input.e820[i].type));
  }
  return page;
}

std::vector<std::uint8_t> command_line_bytes(const BzImage& kernel, std::string_view cmdline) {
  const std::uint64_t limit = std::min<std::uint64_t>(kernel.cmdline_size, kCmdlineRegionBytes - 1);
  if (cmdline.size() > limit)
    fail("the kernel command line is {} bytes, longer than the {} bytes this kernel accepts (its cmdline_size{})",
         cmdline.size(), limit, limit < kernel.cmdline_size ? ", capped by lockvisor's command-line area" : "");
  if (cmdline.find('\0') != std::string_view::npos) fail("the kernel command line contains a NUL byte");
  std::vector<std::uint8_t> bytes(cmdline.begin(), cmdline.end());
  bytes.push_back(0);
  return bytes;
}

}  // namespace lockvisor::linuxboot
