// Tests for the RV64 boot: an image loaded at its link address in RAM,
// BootInfo and the device tree where riscv_boot.h puts them, hart 0's
// entry registers, and the refusals.
#include "vmm/arch/riscv64/rv_boot.h"

#include <elf.h>

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "lockvisor/abi/boot_info.h"
#include "lockvisor/abi/riscv_boot.h"
#include "tests/support/elf_header.h"
#include "vmm/util/error.h"

namespace lockvisor::arch::riscv64 {
namespace {

constexpr std::uint64_t kRamBytes = 8ull << 20;
constexpr std::uint64_t kEntryOffset = 0x10;

// A one-segment executable at kRiscvImageBase: 64 bytes of text, 4 KiB of bss.
std::vector<std::byte> image(std::uint16_t machine = EM_RISCV) {
  const Elf64_Ehdr eh = test::executable_header(machine, abi::kRiscvImageBase + kEntryOffset, 1);
  Elf64_Phdr ph{};
  ph.p_type = PT_LOAD;
  ph.p_flags = PF_R | PF_X;
  ph.p_offset = sizeof eh + sizeof ph;
  ph.p_vaddr = ph.p_paddr = abi::kRiscvImageBase;
  ph.p_filesz = 64;
  ph.p_memsz = 64 + 4096;
  std::vector<std::byte> out(sizeof eh + sizeof ph + 64, std::byte{0x13});
  std::memcpy(out.data(), &eh, sizeof eh);
  std::memcpy(out.data() + sizeof eh, &ph, sizeof ph);
  return out;
}

RvBootSettings settings() {
  RvBootSettings s;
  s.harts = 2;
  s.timebase_hz = 10'000'000;
  s.flags = abi::kBootFlagSbiPvlock;
  s.sbi_experimental_eid = 0x0850564C;
  s.seed = 42;
  s.program = "rv-sbi-pvlock";
  s.args = "rounds=3";
  return s;
}

template <typename T>
const T& at(const std::vector<std::byte>& ram, std::uint64_t gpa) {
  return *reinterpret_cast<const T*>(ram.data() + (gpa - abi::kRiscvRamBase));
}

TEST(RvBoot, ImageBootInfoAndDeviceTreeWhereTheContractSays) {
  std::vector<std::byte> ram(kRamBytes);
  auto s = settings();
  s.workload = abi::WorkloadParams{};
  std::strcpy(s.workload->lock, "pvqspinlock");
  const RvEntry entry = prepare_rv_boot(ram, image(), s);
  EXPECT_EQ(entry.pc, abi::kRiscvImageBase + kEntryOffset);
  EXPECT_EQ(entry.a0, 0u);
  EXPECT_EQ(entry.a1, abi::kRiscvFdtGpa);
  EXPECT_EQ(at<std::uint8_t>(ram, abi::kRiscvImageBase), 0x13);

  const auto& boot = at<abi::BootInfo>(ram, abi::kRiscvBootInfoGpa);
  EXPECT_EQ(boot.magic, abi::kBootInfoMagic);
  EXPECT_EQ(boot.version, abi::kBootInfoVersion);
  EXPECT_EQ(boot.vcpu_count, 2u);
  EXPECT_EQ(boot.flags, abi::kBootFlagSbiPvlock | abi::kBootFlagWorkload);
  EXPECT_EQ(boot.tsc_khz, 10'000u);
  EXPECT_EQ(boot.sbi_experimental_eid, 0x0850564Cu);
  EXPECT_STREQ(boot.program, "rv-sbi-pvlock");
  EXPECT_STREQ(boot.args, "rounds=3");
  EXPECT_EQ(boot.free_start, abi::kRiscvImageBase + (2ull << 20));  // the image's end, 2 MiB aligned
  EXPECT_EQ(boot.free_end, abi::kRiscvRamBase + kRamBytes);
  EXPECT_EQ(boot.workload.magic, abi::kWorkloadParamsMagic);
  EXPECT_STREQ(boot.workload.lock, "pvqspinlock");

  const auto* fdt = reinterpret_cast<const unsigned char*>(&at<std::uint8_t>(ram, abi::kRiscvFdtGpa));
  EXPECT_EQ((fdt[0] << 24) | (fdt[1] << 16) | (fdt[2] << 8) | fdt[3], 0xd00dfeed);
}

TEST(RvBoot, Refusals) {
  std::vector<std::byte> ram(kRamBytes);
  auto s = settings();
  s.harts = abi::kRiscvMaxHarts + 1;
  EXPECT_THROW(prepare_rv_boot(ram, image(), s), Error);
  s = settings();
  s.program = std::string(abi::kProgramNameBytes, 'x');
  EXPECT_THROW(prepare_rv_boot(ram, image(), s), Error);
  EXPECT_THROW(prepare_rv_boot(ram, image(EM_X86_64), settings()), Error);
  std::vector<std::byte> small(abi::kRiscvImageBase - abi::kRiscvRamBase);  // no room for the image
  EXPECT_THROW(prepare_rv_boot(small, image(), settings()), Error);
}

}  // namespace
}  // namespace lockvisor::arch::riscv64
