// The boot tables decide what guest CPL3 code may do on every KVM flavour:
// with IOPL = 0 (PVM forces it at CPL3; lockvisor uses it everywhere) the TSS
// I/O permission bitmap alone grants or denies each port. These tests read the
// tables as the CPU would.
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "lockvisor/abi/doorbell.h"
#include "lockvisor/abi/guest_layout.h"
#include "vmm/kvm/guest_memory.h"
#include "vmm/machine/x86_boot.h"

namespace lockvisor::machine {
namespace {
namespace abi = lockvisor::abi;

constexpr unsigned kVcpus = 3;

class BootTablesTest : public ::testing::Test {
 protected:
  BootTablesTest() : memory_(64u << 20) { write_boot_tables(memory_, kVcpus); }
  const std::uint8_t* tss(unsigned index) const {
    return reinterpret_cast<const std::uint8_t*>(memory_.range(abi::kTssAddr + index * abi::kTssStride, abi::kTssStride)->data());
  }
  std::uint64_t gdt_entry(std::size_t slot) const {
    std::uint64_t entry;
    std::memcpy(&entry, memory_.range(abi::kGdtAddr + slot * 8, 8)->data(), 8);
    return entry;
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
    const std::uint64_t low = gdt_entry((abi::kSelFirstTss + 16 * v) / 8);
    const std::uint64_t limit = (low & 0xFFFF) | ((low >> 48 & 0xF) << 16);
    const std::uint64_t base = (low >> 16 & 0xFFFFFF) | ((low >> 56 & 0xFF) << 24) |
                               (gdt_entry((abi::kSelFirstTss + 16 * v) / 8 + 1) << 32);
    EXPECT_EQ(limit, abi::kTssLimit);
    EXPECT_EQ(base, abi::kTssAddr + v * abi::kTssStride);
    EXPECT_EQ(low >> 40 & 0xFF, 0x89u);  // present, available 64-bit TSS
  }
  kvm_sregs sregs = boot_sregs({}, 1);
  EXPECT_EQ(sregs.tr.limit, abi::kTssLimit);
  EXPECT_EQ(sregs.tr.base, abi::kTssAddr + abi::kTssStride);
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
