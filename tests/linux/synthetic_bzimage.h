// A synthetic bzImage for the tests: a byte buffer with a correct setup
// header (Documentation/arch/x86/boot.rst offsets) and a payload of
// recognisable bytes. Tests break one field at a time to see each refusal.
#pragma once
#include <cstdint>
#include <vector>

#include "vmm/linuxboot/le_bytes.h"

namespace lockvisor::linuxboot::testing {

struct SyntheticKernel {
  unsigned setup_sects = 4;
  std::uint16_t protocol = 0x020F;
  std::uint16_t xloadflags = 0x7F;
  std::uint32_t payload_bytes = 64 * 1024;
  std::uint32_t init_size = 8u << 20;
  std::uint64_t pref_address = 16u << 20;
  std::uint32_t kernel_alignment = 2u << 20;
  std::uint8_t relocatable = 1;
  std::uint32_t cmdline_size = 2047;
  std::uint32_t initrd_addr_max = 0x7FFFFFFF;
  std::uint8_t header_jump = 0x6A;  // header ends at 0x202 + 0x6A = 0x26C, as in Linux 6.1

  std::vector<std::uint8_t> build() const {
    const std::size_t setup_bytes = (std::size_t{setup_sects == 0 ? 4u : setup_sects} + 1) * 512;
    std::vector<std::uint8_t> f(setup_bytes + payload_bytes, 0);
    put8(f, 0x1F1, static_cast<std::uint8_t>(setup_sects));
    put32(f, 0x1F4, (payload_bytes + 15) / 16);
    put16(f, 0x1FE, 0xAA55);
    put8(f, 0x200, 0xEB);
    put8(f, 0x201, header_jump);
    put_chars(f, 0x202, "HdrS");
    put16(f, 0x206, protocol);
    put8(f, 0x211, 0x01);  // LOADED_HIGH
    put32(f, 0x214, 0x100000);
    put32(f, 0x22C, initrd_addr_max);
    put32(f, 0x230, kernel_alignment);
    put8(f, 0x234, relocatable);
    put16(f, 0x236, xloadflags);
    put32(f, 0x238, cmdline_size);
    put64(f, 0x258, pref_address);
    put32(f, 0x260, init_size);
    for (std::size_t i = setup_bytes; i < f.size(); ++i) f[i] = static_cast<std::uint8_t>(i * 7 + 1);
    return f;
  }
};

}  // namespace lockvisor::linuxboot::testing
