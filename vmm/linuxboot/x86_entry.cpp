#include "vmm/linuxboot/x86_entry.h"

#include "vmm/linuxboot/le_bytes.h"

namespace lockvisor::linuxboot {
namespace {

constexpr std::uint64_t kTableBytes = 4096;
constexpr std::uint64_t kPresent = 1u << 0, kWritable = 1u << 1, kPageSize = 1u << 7;

}  // namespace

std::vector<std::uint8_t> boot_gdt() {
  std::vector<std::uint8_t> gdt(kGdtEntries * 8, 0);
  put64(gdt, kBootCs, kGdtCode64);
  put64(gdt, kBootDs, kGdtData);
  return gdt;
}

std::vector<std::uint8_t> identity_page_tables(std::uint64_t base) {
  std::vector<std::uint8_t> tables((2 + kPageDirectories) * kTableBytes, 0);
  const std::uint64_t pdpt = base + kTableBytes;
  const std::uint64_t pd0 = base + 2 * kTableBytes;
  put64(tables, 0, pdpt | kPresent | kWritable);
  for (unsigned d = 0; d < kPageDirectories; ++d) {
    put64(tables, kTableBytes + d * 8, (pd0 + d * kTableBytes) | kPresent | kWritable);
    for (unsigned e = 0; e < 512; ++e) {
      const std::uint64_t phys = (std::uint64_t{d} << 30) | (std::uint64_t{e} << 21);
      put64(tables, (2 + d) * kTableBytes + e * 8, phys | kPresent | kWritable | kPageSize);
    }
  }
  return tables;
}

EntryState boot_entry_state(std::uint64_t kernel_addr, std::uint64_t boot_params_addr, std::uint64_t page_tables_addr,
                            std::uint64_t gdt_addr, std::uint64_t stack_top) {
  EntryState state;
  state.rip = kernel_addr + kEntryOffset;
  state.rsi = boot_params_addr;
  state.rsp = stack_top;
  state.cr3 = page_tables_addr;
  state.gdt_base = gdt_addr;
  state.gdt_limit = kGdtEntries * 8 - 1;
  state.cs = {.base = 0, .limit = 0xFFFFFFFF, .selector = kBootCs, .type = 0xB,
              .present = 1, .dpl = 0, .db = 0, .s = 1, .l = 1, .g = 1};
  state.data = {.base = 0, .limit = 0xFFFFFFFF, .selector = kBootDs, .type = 0x3,
                .present = 1, .dpl = 0, .db = 1, .s = 1, .l = 0, .g = 1};
  return state;
}

}  // namespace lockvisor::linuxboot
