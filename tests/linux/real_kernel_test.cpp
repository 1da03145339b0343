// Debian 12's own kernels (linux-image-amd64, linux-image-cloud-amd64) parse
// and plan; skipped when none is found (real_kernels.h says where it looks;
// tools/linux-guest/fetch-kernels.sh fetches them).
#include <gtest/gtest.h>

#include "tests/linux/real_kernels.h"
#include "tests/support/ci_required.h"
#include "vmm/linuxboot/bzimage.h"
#include "vmm/linuxboot/linux_boot_plan.h"
#include "vmm/util/error.h"

namespace lockvisor::linuxboot {
namespace {

TEST(RealKernel, DebianKernelsParseAndPlan) {
  const auto kernels = testing::find_real_kernels();
  if (kernels.empty()) LOCKVISOR_SKIP_OUTSIDE_CI("no Debian kernel found: run tools/linux-guest/fetch-kernels.sh");
  for (const auto& k : kernels) {
    SCOPED_TRACE(k.label + " " + k.path.string());
    const auto file = testing::read_file(k.path);
    const BzImage image = parse_bzimage(file, k.path.string());
    // Facts about every 64-bit Debian 12 kernel (Linux 6.1).
    EXPECT_GE(image.protocol, 0x020F);
    EXPECT_TRUE(image.xloadflags & kXlfKernel64);
    EXPECT_TRUE(image.relocatable);
    EXPECT_EQ(image.pref_address, 16u << 20);
    EXPECT_EQ(image.kernel_alignment, 2u << 20);
    EXPECT_GE(image.cmdline_size, 2047u);
    EXPECT_GT(image.init_size, image.payload_size);
    EXPECT_EQ(image.payload_offset + image.payload_size, file.size());
    EXPECT_EQ(image.setup_header.size(), 0x26Cu - 0x1F1);

    const std::vector<std::uint8_t> initrd(5u << 20, 0x5A);
    LinuxBootInput input;
    input.kernel = file;
    input.kernel_name = k.path.string();
    input.initrd = std::span<const std::uint8_t>(initrd);
    input.initrd_name = "initrd";
    input.cmdline = "console=ttyS0 panic=-1";
    input.memory_bytes = 256u << 20;
    input.vcpu_count = 64;
    const LinuxBootPlan plan = plan_linux_boot(input);
    EXPECT_EQ(plan.bsp.rip, (16u << 20) + 0x200);
    EXPECT_EQ(plan.initrd_addr + initrd.size(), 256u << 20);
    EXPECT_LT(plan.min_memory_bytes, 128u << 20) << "a Debian kernel and a 5 MiB initrd fit in 128 MiB";
  }
}

// The nested-KVM runner keeps Debian's kernel as an uncompressed ELF vmlinux:
// a real file of the kind users pass by mistake.
TEST(RealKernel, ElfVmlinuxIsRefusedSayingWhatItIs) {
  const auto path = testing::nested_kvm_elf_kernel();
  if (path.empty()) LOCKVISOR_SKIP_OUTSIDE_CI("no ELF vmlinux in the nested-KVM cache (tools/nested-kvm/prepare.sh makes it)");
  const auto file = testing::read_file(path);
  try {
    parse_bzimage(file, path.string());
    ADD_FAILURE() << "accepted an ELF file";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage);
    EXPECT_NE(std::string(e.what()).find("is an ELF file (a vmlinux?), not a bzImage"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lockvisor::linuxboot
