#include "vmm/linuxboot/linux_layout.h"

#include <algorithm>

#include "vmm/util/error.h"

namespace lockvisor::linuxboot {
namespace {

constexpr std::uint64_t align_up(std::uint64_t value, std::uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}
constexpr std::uint64_t align_down(std::uint64_t value, std::uint64_t alignment) {
  return value / alignment * alignment;
}
std::uint64_t mib_up(std::uint64_t bytes) { return (bytes + (1 << 20) - 1) >> 20; }

}  // namespace

void check_memory_size(std::uint64_t memory_bytes) {
  if (memory_bytes > kMaxMemoryBytes)
    fail("a Linux guest gets at most {} MiB of memory (RAM must end below the 32-bit MMIO hole at "
         "3 GiB), {} MiB asked", kMaxMemoryBytes >> 20, memory_bytes >> 20);
  if (memory_bytes < kHighMemoryStart || memory_bytes % kPageBytes != 0)
    fail("guest memory of {} bytes is not a whole number of 4 KiB pages above 1 MiB", memory_bytes);
}

std::vector<E820Entry> e820_map(std::uint64_t memory_bytes) {
  check_memory_size(memory_bytes);
  return {
      {0, kEbdaStart, E820Type::kRam},
      {kEbdaStart, kHighMemoryStart - kEbdaStart, E820Type::kReserved},
      {kHighMemoryStart, memory_bytes - kHighMemoryStart, E820Type::kRam},
  };
}

KernelPlacement place_kernel(const BzImage& kernel, std::uint64_t memory_bytes) {
  check_memory_size(memory_bytes);
  KernelPlacement placed;
  placed.footprint = std::max<std::uint64_t>(kernel.init_size, kernel.payload_size);
  const bool pref_aligned = !kernel.relocatable || kernel.pref_address % kernel.kernel_alignment == 0;
  if (kernel.pref_address >= kHighMemoryStart && pref_aligned) {
    placed.addr = kernel.pref_address;
  } else if (kernel.relocatable) {
    placed.addr = align_up(kDefaultKernelAddr, kernel.kernel_alignment);
  } else {
    fail("kernel is not relocatable and its preferred address 0x{:X} is below 1 MiB", kernel.pref_address);
  }
  if (placed.addr > memory_bytes || placed.footprint > memory_bytes - placed.addr)
    fail("the kernel needs {} MiB of guest memory (loaded at 0x{:X} with init_size {} MiB), only {} MiB given",
         mib_up(placed.end()), placed.addr, mib_up(placed.footprint), memory_bytes >> 20);
  return placed;
}

std::uint64_t place_initrd(const BzImage& kernel, const KernelPlacement& placed, std::uint64_t initrd_size,
                           std::uint64_t memory_bytes) {
  // The last byte may be at initrd_addr_max, so the initrd may end one past it.
  const std::uint64_t limit = std::min<std::uint64_t>(std::uint64_t{kernel.initrd_addr_max} + 1, memory_bytes);
  // Above the kernel, as high as allowed.
  if (limit >= placed.end() && limit - placed.end() >= initrd_size) {
    const std::uint64_t addr = align_down(limit - initrd_size, kPageBytes);
    if (addr >= placed.end()) return addr;
  }
  // Between 1 MiB and the kernel.
  const std::uint64_t below_top = std::min(limit, placed.addr);
  if (below_top >= kHighMemoryStart && below_top - kHighMemoryStart >= initrd_size) {
    const std::uint64_t addr = align_down(below_top - initrd_size, kPageBytes);
    if (addr >= kHighMemoryStart) return addr;
  }
  fail("the initrd ({} bytes, {} MiB) does not fit: with the kernel at 0x{:X}-0x{:X} and the initrd ending "
       "below 0x{:X} (min of guest memory, {} MiB, and the kernel's initrd_addr_max 0x{:X}), the largest "
       "free range is {} MiB; give the guest more memory",
       initrd_size, mib_up(initrd_size), placed.addr, placed.end(), limit, memory_bytes >> 20,
       kernel.initrd_addr_max,
       std::max(limit > placed.end() ? limit - placed.end() : 0,
                below_top > kHighMemoryStart ? below_top - kHighMemoryStart : 0) >> 20);
}

}  // namespace lockvisor::linuxboot
