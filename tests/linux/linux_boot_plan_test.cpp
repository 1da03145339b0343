// plan_linux_boot: the writes never overlap and stay inside RAM, carry what
// they say, and the entry state matches the 64-bit boot protocol; every bad
// input is refused before anything runs.
#include "vmm/linuxboot/linux_boot_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "tests/linux/synthetic_bzimage.h"
#include "vmm/linuxboot/boot_params.h"
#include "vmm/linuxboot/kvm_entry.h"
#include "vmm/linuxboot/le_bytes.h"
#include "vmm/util/error.h"

namespace lockvisor::linuxboot {
namespace {

using ::testing::HasSubstr;
using testing::SyntheticKernel;

constexpr std::uint64_t kMiB = 1ull << 20;

struct Fixture {
  std::vector<std::uint8_t> kernel = SyntheticKernel{}.build();
  std::vector<std::uint8_t> initrd = std::vector<std::uint8_t>(3 * kMiB + 123, 0xA5);
  LinuxBootInput input() const {
    LinuxBootInput in;
    in.kernel = kernel;
    in.kernel_name = "vmlinuz-test";
    in.initrd = std::span<const std::uint8_t>(initrd);
    in.initrd_name = "initrd-test";
    in.cmdline = "console=ttyS0 panic=-1";
    in.memory_bytes = 128 * kMiB;
    in.vcpu_count = 4;
    return in;
  }
};

std::string refusal(const LinuxBootInput& in) {
  try {
    plan_linux_boot(in);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage);
    return e.what();
  }
  ADD_FAILURE() << "plan accepted";
  return "";
}

const MemoryWrite& write_named(const LinuxBootPlan& plan, const std::string& what) {
  for (const auto& w : plan.writes)
    if (w.what == what) return w;
  throw std::runtime_error("no write " + what);
}

void expect_disjoint_inside(const LinuxBootPlan& plan, std::uint64_t memory) {
  for (std::size_t i = 0; i < plan.writes.size(); ++i) {
    EXPECT_FALSE(plan.writes[i].bytes().empty()) << plan.writes[i].what;
    EXPECT_LE(plan.writes[i].end(), memory) << plan.writes[i].what;
    for (std::size_t j = 0; j < plan.writes.size(); ++j)
      if (i != j) {
        EXPECT_TRUE(plan.writes[i].end() <= plan.writes[j].gpa || plan.writes[j].end() <= plan.writes[i].gpa)
            << plan.writes[i].what << " overlaps " << plan.writes[j].what;
      }
  }
  for (std::size_t i = 1; i < plan.writes.size(); ++i) {
    EXPECT_LT(plan.writes[i - 1].gpa, plan.writes[i].gpa);
  }
}

TEST(LinuxBootPlan, WritesAreDisjointAndInsideRam) {
  Fixture f;
  for (unsigned vcpus : {1u, 2u, 64u, kMaxVcpus}) {
    for (bool mp : {false, true}) {
      for (auto model : {AcpiPowerModel::kFixedHardware, AcpiPowerModel::kHardwareReduced}) {
        auto in = f.input();
        in.vcpu_count = vcpus;
        in.options.mp_table = mp;
        in.options.acpi.power_model = model;
        const auto plan = plan_linux_boot(in);
        expect_disjoint_inside(plan, in.memory_bytes);
        EXPECT_EQ(plan.writes.size(), mp ? 8u : 7u);
        // The boot stack page (0x8000-0x8FFF) is never written.
        for (const auto& w : plan.writes) {
          EXPECT_TRUE(w.end() <= 0x8000 || w.gpa >= 0x9000) << w.what;
        }
        // Everything below 1 MiB avoids the real-mode IVT/BDA page.
        for (const auto& w : plan.writes) {
          EXPECT_GE(w.gpa, 0x1000u) << w.what;
        }
      }
    }
  }
}

TEST(LinuxBootPlan, WritesCarryWhatTheySay) {
  Fixture f;
  const auto in = f.input();
  const auto plan = plan_linux_boot(in);
  const auto& kernel = write_named(plan, "kernel");
  EXPECT_EQ(kernel.gpa, 16 * kMiB);
  EXPECT_EQ(kernel.bytes().data(), f.kernel.data() + 5 * 512) << "the payload, borrowed, not copied";
  EXPECT_EQ(kernel.bytes().size(), f.kernel.size() - 5 * 512);
  const auto& initrd = write_named(plan, "initrd");
  EXPECT_EQ(initrd.bytes().data(), f.initrd.data());
  EXPECT_EQ(initrd.gpa, plan.initrd_addr);
  EXPECT_EQ(initrd.gpa % 4096, 0u);
  EXPECT_GE(initrd.gpa, plan.kernel_placement.end());

  const auto zero_page = write_named(plan, "boot_params").bytes();
  EXPECT_EQ(write_named(plan, "boot_params").gpa, kBootParamsAddr);
  EXPECT_EQ(get32(zero_page, kBpCmdLinePtr), kCmdlineAddr);
  EXPECT_EQ(get32(zero_page, kBpRamdiskImage), plan.initrd_addr);
  EXPECT_EQ(get32(zero_page, kBpRamdiskSize), f.initrd.size());
  EXPECT_EQ(get64(zero_page, kBpAcpiRsdpAddr), plan.rsdp_addr);
  EXPECT_EQ(zero_page[kBpE820Entries], plan.e820.size());

  const auto& cmdline = write_named(plan, "command line");
  EXPECT_EQ(cmdline.gpa, kCmdlineAddr);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(cmdline.bytes().data())), in.cmdline);

  EXPECT_EQ(plan.rsdp_addr, kAcpiAddr);
  EXPECT_EQ(write_named(plan, "ACPI tables").gpa, kAcpiAddr);
  const auto acpi = write_named(plan, "ACPI tables").bytes();
  EXPECT_EQ(std::string(acpi.begin(), acpi.begin() + 8), "RSD PTR ");
  EXPECT_EQ(plan.mp_table_addr, kMpTableAddr);
  const auto mp = write_named(plan, "MP table").bytes();
  EXPECT_EQ(std::string(mp.begin(), mp.begin() + 4), "_MP_");
  EXPECT_EQ(plan.power.sleep_port, kPm1aControlPort);
  EXPECT_EQ(plan.min_memory_bytes, 16 * kMiB + 8 * kMiB + 3 * kMiB + 4096) << "kernel end + the initrd in pages";
}

TEST(LinuxBootPlan, PageTablesIdentityMapFourGiB) {
  Fixture f;
  const auto plan = plan_linux_boot(f.input());
  const auto& pt = write_named(plan, "page tables");
  ASSERT_EQ(pt.gpa, plan.bsp.cr3);
  const auto bytes = pt.bytes();
  ASSERT_EQ(bytes.size(), 6u * 4096);
  // Walk the tables like the MMU for a few addresses, including RAM, the
  // kernel, the top of 3 GiB and the LAPIC page.
  auto translate = [&](std::uint64_t va) -> std::uint64_t {
    auto entry = [&](std::uint64_t table, unsigned index) { return get64(bytes, table - pt.gpa + index * 8); };
    const std::uint64_t pml4e = entry(plan.bsp.cr3, (va >> 39) & 511);
    EXPECT_EQ(pml4e & 3, 3u);
    const std::uint64_t pdpte = entry(pml4e & ~0xFFFull, (va >> 30) & 511);
    EXPECT_EQ(pdpte & 3, 3u);
    const std::uint64_t pde = entry(pdpte & ~0xFFFull, (va >> 21) & 511);
    EXPECT_EQ(pde & 0x83, 0x83u) << "present, writable, 2 MiB page";
    return (pde & ~0x1FFFFFull) | (va & 0x1FFFFF);
  };
  for (std::uint64_t va : std::initializer_list<std::uint64_t>{0x0ull, 0x7000ull, 16 * kMiB + 0x200, 0xBFFFFFFFull, 0xFEE00000ull, 0xFFFFFFFFull})
    EXPECT_EQ(translate(va), va);
}

TEST(LinuxBootPlan, EntryStateFollowsThe64BitProtocol) {
  Fixture f;
  const auto plan = plan_linux_boot(f.input());
  const EntryState& s = plan.bsp;
  EXPECT_EQ(s.rip, 16 * kMiB + 0x200);
  EXPECT_EQ(s.rsi, kBootParamsAddr);
  EXPECT_EQ(s.rsp, kBootStackTop);
  EXPECT_EQ(s.rflags & (1u << 9), 0u) << "interrupts disabled";
  EXPECT_EQ(s.cr0 & 0x80000001, 0x80000001u) << "PE and PG";
  EXPECT_NE(s.cr4 & 0x20, 0u) << "PAE";
  EXPECT_EQ(s.efer & 0x500, 0x500u) << "LME and LMA";
  EXPECT_EQ(s.cs.selector, 0x10);
  EXPECT_EQ(s.data.selector, 0x18);
  EXPECT_EQ(s.cs.l, 1);
  EXPECT_EQ(s.cs.db, 0);
  EXPECT_EQ(s.gdt_base, kGdtAddr);
  EXPECT_EQ(s.gdt_limit, 31);
  // The GDT in memory holds the same descriptors as the segment registers.
  const auto gdt = write_named(plan, "GDT").bytes();
  const std::uint64_t cs = get64(gdt, 0x10), ds = get64(gdt, 0x18);
  EXPECT_EQ((cs >> 40) & 0xF, s.cs.type);
  EXPECT_EQ((cs >> 47) & 1, s.cs.present);
  EXPECT_EQ((cs >> 53) & 1, s.cs.l);
  EXPECT_EQ((cs >> 54) & 1, s.cs.db);
  EXPECT_EQ((cs >> 55) & 1, s.cs.g);
  EXPECT_EQ((cs >> 44) & 1, s.cs.s);
  EXPECT_EQ((ds >> 40) & 0xF, s.data.type);
  EXPECT_EQ((ds >> 54) & 1, s.data.db);
  EXPECT_EQ((ds >> 53) & 1, 0u);
  EXPECT_EQ(cs & 0xFFFF, 0xFFFFu);
  EXPECT_EQ((cs >> 48) & 0xF, 0xFu);

  // The KVM structures carry the same values.
  kvm_sregs current{};
  current.tr.selector = 0x77;
  current.idt.limit = 0xFFFF;
  const kvm_sregs sregs = entry_sregs(s, current);
  EXPECT_EQ(sregs.cs.selector, 0x10);
  EXPECT_EQ(sregs.cs.l, 1);
  EXPECT_EQ(sregs.cs.limit, 0xFFFFFFFFu);
  for (const kvm_segment* seg : {&sregs.ds, &sregs.es, &sregs.ss, &sregs.fs, &sregs.gs}) {
    EXPECT_EQ(seg->selector, 0x18);
    EXPECT_EQ(seg->type, 3);
    EXPECT_EQ(seg->present, 1);
    EXPECT_EQ(seg->db, 1);
  }
  EXPECT_EQ(sregs.cr0, s.cr0);
  EXPECT_EQ(sregs.cr3, s.cr3);
  EXPECT_EQ(sregs.cr4, s.cr4);
  EXPECT_EQ(sregs.efer, s.efer);
  EXPECT_EQ(sregs.gdt.base, kGdtAddr);
  EXPECT_EQ(sregs.gdt.limit, 31);
  EXPECT_EQ(sregs.tr.selector, 0x77) << "TR kept from KVM's state";
  EXPECT_EQ(sregs.idt.limit, 0xFFFF);
  const kvm_regs regs = entry_regs(s);
  EXPECT_EQ(regs.rip, s.rip);
  EXPECT_EQ(regs.rsi, kBootParamsAddr);
  EXPECT_EQ(regs.rsp, kBootStackTop);
  EXPECT_EQ(regs.rflags, 2u);
  EXPECT_EQ(regs.rax, 0u);
}

TEST(LinuxBootPlan, WithoutInitrd) {
  Fixture f;
  auto in = f.input();
  in.initrd.reset();
  const auto plan = plan_linux_boot(in);
  EXPECT_EQ(plan.initrd_addr, 0u);
  const auto zero_page = write_named(plan, "boot_params").bytes();
  EXPECT_EQ(get32(zero_page, kBpRamdiskImage), 0u);
  EXPECT_EQ(get32(zero_page, kBpRamdiskSize), 0u);
  EXPECT_EQ(plan.min_memory_bytes, 24 * kMiB);
  EXPECT_THROW(write_named(plan, "initrd"), std::runtime_error);
}

TEST(LinuxBootPlan, RefusesBadVcpuCounts) {
  Fixture f;
  auto in = f.input();
  in.vcpu_count = 0;
  EXPECT_THAT(refusal(in), HasSubstr("1 to 254 vCPUs, 0 asked"));
  in.vcpu_count = 255;
  EXPECT_THAT(refusal(in), HasSubstr("1 to 254 vCPUs, 255 asked"));
}

TEST(LinuxBootPlan, RefusesTooMuchOrOddMemory) {
  Fixture f;
  auto in = f.input();
  in.memory_bytes = 4ull << 30;
  EXPECT_THAT(refusal(in), HasSubstr("at most 3072 MiB"));
  in.memory_bytes = 128 * kMiB + 100;
  EXPECT_THAT(refusal(in), HasSubstr("4 KiB pages"));
}

TEST(LinuxBootPlan, RefusesMemoryTooSmallForTheKernel) {
  Fixture f;
  auto in = f.input();
  in.memory_bytes = 20 * kMiB;
  EXPECT_THAT(refusal(in), HasSubstr("the kernel needs 24 MiB of guest memory"));
}

TEST(LinuxBootPlan, RefusesAnInitrdTooBigForMemory) {
  Fixture f;
  f.initrd.assign(30 * kMiB, 1);
  auto in = f.input();
  in.memory_bytes = 48 * kMiB;
  EXPECT_THAT(refusal(in), HasSubstr("the initrd (31457280 bytes, 30 MiB) does not fit"));
}

TEST(LinuxBootPlan, RefusesAnEmptyInitrd) {
  Fixture f;
  f.initrd.clear();
  EXPECT_THAT(refusal(f.input()), HasSubstr("initrd initrd-test is empty"));
}

TEST(LinuxBootPlan, RefusesACommandLineOverCmdlineSize) {
  Fixture f;
  auto in = f.input();
  in.cmdline = std::string(2048, 'x');
  EXPECT_THAT(refusal(in), HasSubstr("command line is 2048 bytes, longer than the 2047 bytes"));
  in.cmdline = std::string(2047, 'x');
  EXPECT_NO_THROW(plan_linux_boot(in));
}

TEST(LinuxBootPlan, RefusesABadKernel) {
  Fixture f;
  f.kernel.resize(10);
  EXPECT_THAT(refusal(f.input()), HasSubstr("vmlinuz-test is too short"));
}

}  // namespace
}  // namespace lockvisor::linuxboot
