// The boot tables decide what guest CPL3 code may do on every KVM flavour:
// with IOPL = 0 (PVM forces it at CPL3; lockvisor uses it everywhere) the TSS
// I/O permission bitmap alone grants or denies each port. These tests read the
// tables as the CPU would.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "lockvisor/abi/boot_info.h"
#include "lockvisor/abi/doorbell.h"
#include "lockvisor/abi/guest_layout.h"
#include "lockvisor/abi/lock_probe.h"
#include "vmm/guest_image.h"
#include "vmm/kvm/guest_memory.h"
#include "vmm/loader/elf_loader.h"
#include "vmm/machine/machine.h"
#include "vmm/machine/x86_boot.h"
#include "vmm/util/error.h"

namespace lockvisor::machine {
namespace {
namespace abi = lockvisor::abi;

constexpr unsigned kVcpus = 3;

// vCPU v's 16-byte TSS descriptor in the GDT at kGdtAddr: its base and limit.
struct TssDescriptor {
  std::uint64_t base, limit, type;
};
TssDescriptor tss_descriptor(const kvm::GuestMemory& memory, unsigned v) {
  std::uint64_t low, high;
  const std::uint64_t at = abi::kGdtAddr + abi::kSelFirstTss + 16 * v;
  std::memcpy(&low, memory.range(at, 8)->data(), 8);
  std::memcpy(&high, memory.range(at + 8, 8)->data(), 8);
  return {(low >> 16 & 0xFFFFFF) | ((low >> 56 & 0xFF) << 24) | (high << 32), (low & 0xFFFF) | ((low >> 48 & 0xF) << 16),
          low >> 40 & 0xFF};
}

class BootTablesTest : public ::testing::Test {
 protected:
  BootTablesTest() : memory_(64u << 20) { write_boot_tables(memory_, kVcpus); }
  const std::uint8_t* tss(unsigned index) const {
    return reinterpret_cast<const std::uint8_t*>(memory_.range(abi::kTssAddr + index * abi::kTssStride, abi::kTssStride)->data());
  }
  kvm::GuestMemory memory_;
};

std::set<unsigned> abi_port_bytes() {
  std::set<unsigned> ports;
  for (const auto& access : abi::kCpl3PortAccesses)
    for (unsigned p = access.port; p < access.port + access.width; ++p) ports.insert(p);
  return ports;
}

TEST_F(BootTablesTest, BitmapGrantsExactlyTheAbiPortsOnEveryVcpu) {
  const auto granted = abi_port_bytes();
  for (unsigned v = 0; v < kVcpus; ++v) {
    for (unsigned port = 0; port < 0x10000; ++port)
      EXPECT_EQ(cpl3_port_allowed(tss(v), port), granted.count(port) == 1) << "vCPU " << v << " port " << port;
  }
}

TEST_F(BootTablesTest, DoorbellsComForwardedButFaultPortDenied) {
  // The named ports the guest's CPL3 code rings, one by one (a regression in
  // kCpl3PortAccesses would otherwise pass the exhaustive test above).
  for (unsigned port : {abi::kPortKvmHypercall, abi::kPortSbiCall, abi::kPortUcall, abi::kPortNop, abi::kPortCom1,
                        abi::kPortCom1Lsr})
    EXPECT_TRUE(cpl3_port_allowed(tss(0), port)) << port;
  EXPECT_FALSE(cpl3_port_allowed(tss(0), abi::kPortFault));  // CPL0 handlers only
  EXPECT_FALSE(cpl3_port_allowed(tss(0), 0x80));
  EXPECT_FALSE(cpl3_port_allowed(tss(0), abi::kPortCom1 + 1));
}

TEST_F(BootTablesTest, TssHasRsp0IoMapBaseAndTerminatingByte) {
  for (unsigned v = 0; v < kVcpus; ++v) {
    std::uint64_t rsp0;
    std::memcpy(&rsp0, tss(v) + 4, sizeof rsp0);
    EXPECT_EQ(rsp0, kernel_stack_top(memory_.size(), v));
    std::uint16_t io_map_base;
    std::memcpy(&io_map_base, tss(v) + 102, sizeof io_map_base);
    EXPECT_EQ(io_map_base, abi::kTssIoMapOffset);
    // The CPU reads two bytes for a port check, so the byte after the bitmap
    // must be 0xFF and inside the limit.
    EXPECT_EQ(tss(v)[abi::kTssLimit], 0xFF);
    EXPECT_EQ(abi::kTssLimit, io_map_base + abi::kIoBitmapPorts / 8);
  }
}

TEST_F(BootTablesTest, GdtTssDescriptorsCoverTheBitmap) {
  for (unsigned v = 0; v < kVcpus; ++v) {
    const TssDescriptor d = tss_descriptor(memory_, v);
    EXPECT_EQ(d.limit, abi::kTssLimit);
    EXPECT_EQ(d.base, abi::kTssAddr + v * abi::kTssStride);
    EXPECT_EQ(d.type, 0x89u);  // present, available 64-bit TSS
  }
  kvm_sregs sregs = boot_sregs({}, 1);
  EXPECT_EQ(sregs.tr.limit, abi::kTssLimit);
  EXPECT_EQ(sregs.tr.base, abi::kTssAddr + abi::kTssStride);
}

// The largest VM: every vCPU's TSS descriptor inside the GDT limit the VMM
// loads, pointing at its own TSS (RSP0 = its kernel stack), the last one
// below the image.
TEST(BootTablesLargestVm, EveryVcpuHasItsTssInsideTheGdt) {
  kvm::GuestMemory memory(256u << 20);
  write_boot_tables(memory, abi::kMaxVcpus);
  for (unsigned v = 0; v < abi::kMaxVcpus; ++v) {
    SCOPED_TRACE(v);
    const kvm_sregs sregs = boot_sregs({}, v);
    ASSERT_LE(sregs.tr.selector + 16u, sregs.gdt.limit + 1u) << "the descriptor is inside the GDT limit";
    const TssDescriptor d = tss_descriptor(memory, v);
    ASSERT_EQ(d.base, sregs.tr.base);
    ASSERT_EQ(d.type, 0x89u);
    std::uint64_t rsp0;
    std::memcpy(&rsp0, memory.range(d.base + 4, 8)->data(), 8);
    ASSERT_EQ(rsp0, kernel_stack_top(memory.size(), v));
  }
  EXPECT_LE(boot_sregs({}, abi::kMaxVcpus - 1).tr.base + abi::kTssStride, abi::kImageBase);
  // The GDT ends before BootInfo, which the boot tables leave alone.
  EXPECT_LE(abi::kGdtAddr + boot_sregs({}, 0).gdt.limit + 1u, abi::kBootInfoAddr);
}

// Every per-vCPU area below the image, sized for kMaxVcpus, lies apart from
// every other: what the guest and the VMM write for vCPU n never lands in
// another area, whatever n.
TEST(GuestLayout, TheAreasBelowTheImageAreDisjointAtTheMostVcpus) {
  struct Area {
    std::string name;
    std::uint64_t start, bytes;
  };
  std::vector<Area> areas = {
      {"GDT", abi::kGdtAddr, abi::kGdtBytes},
      {"BootInfo", abi::kBootInfoAddr, sizeof(abi::BootInfo)},
      {"page tables", abi::kPageTableAddr, abi::kPageTableBytes},
      {"IDT", abi::kIdtAddr, abi::kIdtEntries * 16},
      {"steal time", abi::kStealTimeAddr, abi::kStealTimeStride * abi::kMaxVcpus},
      {"lock probe", abi::kLockProbeAddr, abi::kLockProbeBytes},
      {"TSS array", abi::kTssAddr, abi::kTssStride * abi::kMaxVcpus},
  };
  std::sort(areas.begin(), areas.end(), [](const Area& a, const Area& b) { return a.start < b.start; });
  EXPECT_GE(areas.front().start, 0x1000u) << "page 0 stays unused";
  for (std::size_t i = 0; i + 1 < areas.size(); ++i)
    EXPECT_LE(areas[i].start + areas[i].bytes, areas[i + 1].start) << areas[i].name << " overlaps " << areas[i + 1].name;
  EXPECT_LE(areas.back().start + areas.back().bytes, abi::kImageBase) << areas.back().name << " overlaps the image";
  EXPECT_LE(sizeof(abi::BootInfo), abi::kBootInfoBytes);
  EXPECT_EQ(abi::kStealTimeAddr % 64, 0u) << "KVM wants 64-byte aligned steal-time records";
  // The run-state pages describe every vCPU.
  EXPECT_GE(abi::kRunStateMaxVcpus, abi::kMaxVcpus);
}

// The built guest image, its per-CPU arrays sized for kMaxVcpus, loads
// below kImageLimit; the most vCPUs need their stacks beside it, more than
// the default --memory, and one 2 MiB page less is refused.
TEST(GuestLayout, TheBuiltImageFitsAndTheMostVcpusNeedTheirStacks) {
  const auto image = embedded_guest_image();
  const auto loaded = vmm::check_elf_image(image, abi::kImageLimit, abi::kImageBase, abi::kImageLimit);
  EXPECT_LE(loaded.end_gpa, abi::kImageLimit);
  const std::uint64_t needed = minimum_memory_mib(abi::kMaxVcpus, image);
  EXPECT_GE(needed << 20, loaded.end_gpa + abi::kMaxVcpus * abi::kVcpuStackBlockBytes);
  MachineConfig config;
  EXPECT_GT(needed, config.memory_mib);
  config.vcpus = abi::kMaxVcpus;
  config.memory_mib = needed;
  EXPECT_NO_THROW(validate_image(config, image));
  config.memory_mib = needed - 2;
  EXPECT_THROW(validate_image(config, image), Error);
}

// CPUID: leaf 1 carries the APIC id's low byte, leaf 0xB all of it, so a
// vCPU past 255 still finds its own id (guest/runtime/start.cpp).
TEST(GuestCpuid, ApicIdsPast255AreWholeInLeaf0xB) {
  std::vector<kvm_cpuid_entry2> supported(3);
  supported[0].function = 1;
  supported[0].ebx = 0x00ABCDEF;
  supported[1].function = 0xB;
  supported[2].function = 0xB;
  supported[2].index = 1;
  for (const unsigned apic_id : {0u, 254u, 255u, 300u, abi::kMaxVcpus - 1}) {
    SCOPED_TRACE(apic_id);
    for (const auto& e : guest_cpuid(supported, apic_id, {})) {
      if (e.function == 1) {
        EXPECT_EQ(e.ebx >> 24, apic_id & 0xFF);
        EXPECT_EQ(e.ebx & 0xFFFFFF, 0xABCDEFu) << "the rest of EBX is KVM's";
      }
      if (e.function == 0xB) {
        EXPECT_EQ(e.edx, apic_id) << "subleaf " << e.index;
      }
    }
  }
}

TEST(BootRegs, EntersWithIoplZeroAndInterruptsOff) {
  const kvm_regs regs = boot_regs(0x100000, 64u << 20, 0);
  EXPECT_EQ(regs.rflags & (3u << 12), 0u);
  EXPECT_EQ(regs.rflags & (1u << 9), 0u);
}

}  // namespace
}  // namespace lockvisor::machine

namespace lockvisor::machine {
namespace {

// The run-state pages (guest_layout.h): kRunStatePages 4 KiB user pages,
// read-only, from kRunStateGpa, walked as the CPU walks them; nothing else in
// their GiB mapped.
TEST(BootTablesRunState, ThePagesAreMappedUserReadOnlyAndAlone) {
  kvm::GuestMemory memory(64u << 20);
  write_boot_tables(memory, 2);
  const auto entry = [&](std::uint64_t table, std::uint64_t index) {
    std::uint64_t e;
    std::memcpy(&e, memory.range(table + index * 8, 8)->data(), 8);
    return e;
  };
  constexpr std::uint64_t kAddrMask = 0x000FFFFFFFFFF000ull;
  const std::uint64_t gpa = abi::kRunStateGpa;
  const std::uint64_t pml4e = entry(abi::kPageTableAddr, gpa >> 39 & 511);
  ASSERT_TRUE(pml4e & 1);
  const std::uint64_t pdpte = entry(pml4e & kAddrMask, gpa >> 30 & 511);
  ASSERT_TRUE(pdpte & 1);
  EXPECT_FALSE(pdpte & 0x80) << "not a 1 GiB page";
  const std::uint64_t pde = entry(pdpte & kAddrMask, gpa >> 21 & 511);
  ASSERT_TRUE(pde & 1);
  EXPECT_FALSE(pde & 0x80) << "not a 2 MiB page";
  ASSERT_GT(abi::kRunStatePages, 1u);
  for (std::uint64_t p = 0; p < abi::kRunStatePages; ++p) {
    SCOPED_TRACE(p);
    const std::uint64_t pte = entry(pde & kAddrMask, (gpa >> 12 & 511) + p);
    EXPECT_EQ(pte & kAddrMask, gpa + p * 4096);
    EXPECT_TRUE(pte & 1) << "present";
    EXPECT_FALSE(pte & 2) << "read-only";
    EXPECT_TRUE(pte & 4) << "user";
  }
  EXPECT_TRUE((pml4e & 4) && (pdpte & 4) && (pde & 4)) << "U/S at every level";
  EXPECT_EQ(entry(pde & kAddrMask, (gpa >> 12 & 511) + abi::kRunStatePages), 0u) << "the next 4 KiB is not mapped";
  EXPECT_EQ(entry(pdpte & kAddrMask, (gpa >> 21 & 511) + 1), 0u) << "the next 2 MiB is not mapped";
  // RAM above 64 MiB stays unmapped too.
  EXPECT_EQ(entry(entry(abi::kPageTableAddr + 0x1000, 0) & kAddrMask, 32), 0u);
}

}  // namespace
}  // namespace lockvisor::machine
