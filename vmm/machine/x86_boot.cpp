#include "vmm/machine/x86_boot.h"

#include <algorithm>
#include <cstring>

#include "lockvisor/abi/doorbell.h"
#include "lockvisor/abi/guest_layout.h"
#include "lockvisor/abi/kvm_hypercall.h"
#include "vmm/util/error.h"

namespace lockvisor::machine {
namespace abi = lockvisor::abi;
namespace {

constexpr std::uint64_t kPagePresent = 1u << 0;
constexpr std::uint64_t kPageWritable = 1u << 1;
constexpr std::uint64_t kPageUser = 1u << 2;
constexpr std::uint64_t kPageLarge = 1u << 7;
constexpr std::uint64_t kTableFlags = kPagePresent | kPageWritable | kPageUser;

constexpr std::uint64_t kCr0 = 0x80050033;  // PG | AM | WP | NE | ET | MP | PE
constexpr std::uint64_t kCr4 = 0x620;       // OSXMMEXCPT | OSFXSR | PAE (no PCIDE: PVM refuses it)
constexpr std::uint64_t kEfer = 0x500;      // LMA | LME

// Flat 64-bit descriptors: code L=1, data; DPL 0 and 3.
constexpr std::uint64_t kGdtKernelCode = 0x00AF9A000000FFFF;
constexpr std::uint64_t kGdtKernelData = 0x00CF92000000FFFF;
constexpr std::uint64_t kGdtUserData = 0x00CFF2000000FFFF;
constexpr std::uint64_t kGdtUserCode = 0x00AFFA000000FFFF;

std::uint64_t tss_address(unsigned index) { return abi::kTssAddr + abi::kTssStride * index; }

kvm_segment flat_segment(std::uint16_t selector, std::uint8_t type, bool code) {
  kvm_segment segment{};
  segment.base = 0;
  segment.limit = 0xFFFFFFFF;
  segment.selector = selector;
  segment.type = type;
  segment.present = 1;
  segment.dpl = static_cast<std::uint8_t>(selector & 3);
  segment.db = code ? 0 : 1;
  segment.s = 1;
  segment.l = code ? 1 : 0;
  segment.g = 1;
  return segment;
}

// Fills one vCPU's TSS (abi::kTssStride bytes, zeroed by the caller's memory):
// RSP0, the I/O map base, and a bitmap that denies every port but the bytes
// of abi::kCpl3PortAccesses. CPL3 runs with IOPL = 0, so on every KVM — and on
// PVM, which ignores IOPL at CPL3 — this bitmap alone decides which `in`/`out`
// exit to the VMM and which raise #GP.
void write_tss(std::uint8_t* tss, std::uint64_t rsp0) {
  std::memcpy(tss + 4, &rsp0, sizeof rsp0);
  const auto io_map_base = static_cast<std::uint16_t>(abi::kTssIoMapOffset);
  std::memcpy(tss + 102, &io_map_base, sizeof io_map_base);
  std::uint8_t* bitmap = tss + abi::kTssIoMapOffset;
  std::memset(bitmap, 0xFF, abi::kIoBitmapPorts / 8 + 1);  // all denied, plus the trailing 0xFF byte
  for (const auto& access : abi::kCpl3PortAccesses)
    for (unsigned port = access.port; port < access.port + access.width; ++port)
      bitmap[port / 8] &= static_cast<std::uint8_t>(~(1u << (port % 8)));
}

}  // namespace

bool cpl3_port_allowed(const std::uint8_t* tss, unsigned port) {
  std::uint16_t io_map_base;
  std::memcpy(&io_map_base, tss + 102, sizeof io_map_base);
  if (io_map_base + port / 8 > abi::kTssLimit) return false;
  return (tss[io_map_base + port / 8] >> (port % 8) & 1) == 0;
}

std::uint64_t kernel_stack_top(std::uint64_t memory_bytes, unsigned index) {
  return memory_bytes - std::uint64_t{index} * abi::kVcpuStackBlockBytes;
}

std::uint64_t user_stack_top(std::uint64_t memory_bytes, unsigned index) {
  return kernel_stack_top(memory_bytes, index) - abi::kKernelStackBytes;
}

std::uint64_t stacks_bottom(std::uint64_t memory_bytes, unsigned vcpu_count) {
  return memory_bytes - std::uint64_t{vcpu_count} * abi::kVcpuStackBlockBytes;
}

void write_boot_tables(const kvm::GuestMemory& memory, unsigned vcpu_count) {
  const std::uint64_t bytes = memory.size();
  constexpr std::uint64_t kTwoMiB = 2u << 20;
  constexpr std::uint64_t kOneGiB = 1u << 30;
  if (bytes % kTwoMiB != 0 || bytes > abi::kMaxMemoryBytes) fail("guest memory must be a multiple of 2 MiB, at most 4 GiB");

  auto table = [&](std::uint64_t gpa) { return reinterpret_cast<std::uint64_t*>(memory.range(gpa, 4096)->data()); };
  const std::uint64_t pml4 = abi::kPageTableAddr;
  const std::uint64_t pdpt = pml4 + 0x1000;
  const std::uint64_t first_pd = pdpt + 0x1000;
  table(pml4)[0] = pdpt | kTableFlags;
  const std::uint64_t gigabytes = (bytes + kOneGiB - 1) / kOneGiB;
  for (std::uint64_t g = 0; g < gigabytes; ++g) {
    const std::uint64_t pd = first_pd + g * 0x1000;
    table(pdpt)[g] = pd | kTableFlags;
    for (std::uint64_t e = 0; e < 512; ++e) {
      const std::uint64_t address = g * kOneGiB + e * kTwoMiB;
      if (address >= bytes) break;  // beyond RAM: not mapped, so a stray access faults (#PF)
      table(pd)[e] = address | kTableFlags | kPageLarge;
    }
  }
  // The vCPU run-state pages, outside RAM (guest_layout.h): 4 KiB pages,
  // user-accessible and read-only (R/W = 0 in its PTE; CR0.WP makes that hold
  // at CPL0 too). The memslot behind it is read-only as well.
  static_assert(abi::kRunStateGpa / kOneGiB >= abi::kMaxMemoryBytes / kOneGiB, "run-state PDPT entry collides with RAM");
  table(pdpt)[abi::kRunStateGpa / kOneGiB] = abi::kRunStatePdAddr | kTableFlags;
  table(abi::kRunStatePdAddr)[(abi::kRunStateGpa % kOneGiB) / kTwoMiB] = abi::kRunStatePtAddr | kTableFlags;
  for (std::uint64_t p = 0; p < abi::kRunStatePages; ++p)
    table(abi::kRunStatePtAddr)[(abi::kRunStateGpa % kTwoMiB) / 4096 + p] =
        (abi::kRunStateGpa + p * 4096) | kPagePresent | kPageUser;

  auto* gdt = reinterpret_cast<std::uint64_t*>(memory.range(abi::kGdtAddr, abi::kGdtBytes)->data());
  gdt[0] = 0;
  gdt[abi::kSelKernelCode / 8] = kGdtKernelCode;
  gdt[abi::kSelKernelData / 8] = kGdtKernelData;
  gdt[abi::kSelUserData / 8] = kGdtUserData;
  gdt[abi::kSelUserCode / 8] = kGdtUserCode;
  for (unsigned i = 0; i < vcpu_count; ++i) {
    const std::uint64_t base = tss_address(i);
    const std::size_t slot = (abi::kSelFirstTss + 16 * i) / 8;
    // 16-byte system descriptor: available 64-bit TSS (type 9), present.
    gdt[slot] = (abi::kTssLimit & 0xFFFF) | ((base & 0xFFFFFF) << 16) | (std::uint64_t{0x89} << 40) |
                ((base >> 24 & 0xFF) << 56);
    gdt[slot + 1] = base >> 32;
    write_tss(reinterpret_cast<std::uint8_t*>(memory.range(base, abi::kTssStride)->data()), kernel_stack_top(bytes, i));
  }
}

kvm_sregs boot_sregs(kvm_sregs sregs, unsigned index) {
  sregs.cs = flat_segment(abi::kSelKernelCode, 0xB, true);
  sregs.ds = sregs.es = sregs.fs = sregs.gs = sregs.ss = flat_segment(abi::kSelKernelData, 0x3, false);
  kvm_segment tr{};
  tr.base = tss_address(index);
  tr.limit = abi::kTssLimit;
  tr.selector = static_cast<std::uint16_t>(abi::kSelFirstTss + 16 * index);
  tr.type = 0xB;  // busy 64-bit TSS, as after LTR
  tr.present = 1;
  sregs.tr = tr;
  sregs.gdt.base = abi::kGdtAddr;
  sregs.gdt.limit = static_cast<std::uint16_t>(abi::kGdtBytes - 1);
  sregs.idt.base = abi::kIdtAddr;
  sregs.idt.limit = static_cast<std::uint16_t>(abi::kIdtEntries * 16 - 1);
  sregs.cr0 = kCr0;
  sregs.cr3 = abi::kPageTableAddr;
  sregs.cr4 = kCr4;
  sregs.efer = kEfer;
  return sregs;
}

kvm_regs boot_regs(std::uint64_t entry, std::uint64_t memory_bytes, unsigned index) {
  kvm_regs regs{};
  regs.rip = entry;
  regs.rsp = kernel_stack_top(memory_bytes, index);
  regs.rdi = abi::kBootInfoAddr;
  regs.rsi = index;
  regs.rdx = user_stack_top(memory_bytes, index);
  regs.rflags = 0x2;  // reserved bit; interrupts off
  return regs;
}

std::vector<kvm_cpuid_entry2> guest_cpuid(std::vector<kvm_cpuid_entry2> entries, unsigned apic_id,
                                          const CpuidOptions& options) {
  // Drop whatever KVM advertises in the hypervisor range: the guest must see
  // exactly the PV features this VMM implements.
  std::erase_if(entries, [](const kvm_cpuid_entry2& e) { return e.function >= 0x40000000 && e.function < 0x40000100; });
  for (auto& entry : entries) {
    if (entry.function == 1) {
      entry.ebx = (entry.ebx & 0x00FFFFFF) | ((apic_id & 0xFF) << 24);  // the low byte; leaf 0xB has it all
      entry.ecx |= 1u << 31;  // "running on a hypervisor"
    }
    if (entry.function == 0xB || entry.function == 0x1F) entry.edx = apic_id;
  }
  kvm_cpuid_entry2 signature{};
  signature.function = abi::kCpuidSignatureLeaf;
  signature.eax = abi::kCpuidFeaturesLeaf;
  signature.ebx = abi::kCpuidSignatureEbx;
  signature.ecx = abi::kCpuidSignatureEcx;
  signature.edx = abi::kCpuidSignatureEdx;
  entries.push_back(signature);
  kvm_cpuid_entry2 features{};
  features.function = abi::kCpuidFeaturesLeaf;
  features.eax = options.pv_unhalt ? abi::kFeaturePvUnhalt : 0;
  if (options.steal_time) features.eax |= abi::kFeatureStealTime;  // KVM keeps the record in-kernel, PVM too
  features.edx = options.dedicated ? abi::kHintsRealtime : 0;
  entries.push_back(features);
  return entries;
}

}  // namespace lockvisor::machine
