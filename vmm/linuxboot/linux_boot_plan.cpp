#include "vmm/linuxboot/linux_boot_plan.h"

#include <algorithm>
#include <stdexcept>

#include "vmm/linuxboot/boot_params.h"
#include "vmm/linuxboot/mp_table.h"
#include "vmm/util/error.h"

namespace lockvisor::linuxboot {
namespace {

MemoryWrite owned(std::uint64_t gpa, std::string what, std::vector<std::uint8_t> bytes) {
  MemoryWrite w;
  w.gpa = gpa;
  w.what = std::move(what);
  w.owned = std::move(bytes);
  return w;
}

MemoryWrite borrowed(std::uint64_t gpa, std::string what, std::span<const std::uint8_t> bytes) {
  MemoryWrite w;
  w.gpa = gpa;
  w.what = std::move(what);
  w.borrowed = bytes;
  return w;
}

// An internal invariant (the layout is fixed), not bad input: a logic_error.
void check_region(const MemoryWrite& w, std::uint64_t start, std::uint64_t bytes) {
  if (w.gpa < start || w.end() > start + bytes)
    throw std::logic_error(fmt::format("Linux boot plan: {} (0x{:X}-0x{:X}) leaves its area 0x{:X}-0x{:X}",
                                       w.what, w.gpa, w.end(), start, start + bytes));
}

std::uint64_t page_up(std::uint64_t v) { return (v + kPageBytes - 1) / kPageBytes * kPageBytes; }

}  // namespace

LinuxBootPlan plan_linux_boot(const LinuxBootInput& input) {
  if (input.vcpu_count < 1 || input.vcpu_count > kMaxVcpus)
    fail("a Linux guest has 1 to {} vCPUs, {} asked", kMaxVcpus, input.vcpu_count);
  check_memory_size(input.memory_bytes);

  LinuxBootPlan plan;
  plan.kernel = parse_bzimage(input.kernel, input.kernel_name);
  const BzImage& kernel = plan.kernel;
  auto cmdline = command_line_bytes(kernel, input.cmdline);

  plan.kernel_placement = place_kernel(kernel, input.memory_bytes);
  const std::uint64_t kernel_end = plan.kernel_placement.end();
  plan.min_memory_bytes = page_up(kernel_end);
  if (input.initrd) {
    if (input.initrd->empty()) fail("initrd {} is empty", input.initrd_name);
    plan.initrd_size = input.initrd->size();
    if (plan.initrd_size > 0xFFFFFFFFull)
      fail("initrd {} is {} bytes, larger than the 4 GiB boot_params can describe", input.initrd_name,
           plan.initrd_size);
    plan.min_memory_bytes = page_up(kernel_end) + page_up(plan.initrd_size);
    plan.initrd_addr = place_initrd(kernel, plan.kernel_placement, plan.initrd_size, input.memory_bytes);
  }

  plan.e820 = e820_map(input.memory_bytes);
  AcpiTables acpi = build_acpi_tables(input.vcpu_count, kAcpiAddr, input.options.acpi);
  plan.rsdp_addr = acpi.rsdp_addr;
  plan.acpi_tables = acpi.tables;
  plan.power = acpi.power;

  BootParamsInput params;
  params.cmdline_addr = kCmdlineAddr;
  params.initrd_addr = plan.initrd_addr;
  params.initrd_size = plan.initrd_size;
  params.rsdp_addr = plan.rsdp_addr;
  params.e820 = plan.e820;

  plan.writes.push_back(owned(kGdtAddr, "GDT", boot_gdt()));
  plan.writes.push_back(owned(kBootParamsAddr, "boot_params", build_boot_params(kernel, params)));
  plan.writes.push_back(owned(kPml4Addr, "page tables", identity_page_tables(kPml4Addr)));
  plan.writes.push_back(owned(kCmdlineAddr, "command line", std::move(cmdline)));
  check_region(plan.writes.back(), kCmdlineAddr, kCmdlineRegionBytes);
  plan.writes.push_back(owned(kAcpiAddr, "ACPI tables", std::move(acpi.bytes)));
  check_region(plan.writes.back(), kAcpiAddr, kAcpiRegionBytes);
  if (input.options.mp_table) {
    MpTable mp = build_mp_table(input.vcpu_count, kMpTableAddr, input.options.acpi.irq0_to_gsi2);
    plan.mp_table_addr = mp.base;
    plan.writes.push_back(owned(kMpTableAddr, "MP table", std::move(mp.bytes)));
    check_region(plan.writes.back(), kMpTableAddr, kMpRegionBytes);
  }
  plan.writes.push_back(borrowed(plan.kernel_placement.addr, "kernel", kernel.payload(input.kernel)));
  if (input.initrd) plan.writes.push_back(borrowed(plan.initrd_addr, "initrd", *input.initrd));

  std::sort(plan.writes.begin(), plan.writes.end(),
            [](const MemoryWrite& a, const MemoryWrite& b) { return a.gpa < b.gpa; });
  for (std::size_t i = 0; i < plan.writes.size(); ++i) {
    const MemoryWrite& w = plan.writes[i];
    if (w.end() > input.memory_bytes)
      throw std::logic_error(fmt::format("Linux boot plan: {} ends at 0x{:X}, past guest memory", w.what, w.end()));
    if (i > 0 && plan.writes[i - 1].end() > w.gpa)
      throw std::logic_error(fmt::format("Linux boot plan: {} overlaps {}", plan.writes[i - 1].what, w.what));
  }
  plan.bsp = boot_entry_state(plan.kernel_placement.addr, kBootParamsAddr, kPml4Addr, kGdtAddr, kBootStackTop);
  return plan;
}

}  // namespace lockvisor::linuxboot
