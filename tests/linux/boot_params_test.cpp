// The zero page's fields, read back at their zero-page.rst offsets, and the
// command-line limit.
#include "vmm/linuxboot/boot_params.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/linux/synthetic_bzimage.h"
#include "vmm/util/error.h"

namespace lockvisor::linuxboot {
namespace {

using ::testing::HasSubstr;
using testing::SyntheticKernel;

TEST(BootParams, FieldsAtTheirOffsets) {
  SyntheticKernel k;
  const auto file = k.build();
  const auto image = parse_bzimage(file, "k");
  BootParamsInput in;
  in.cmdline_addr = 0x20000;
  in.initrd_addr = 0x1234'5000;
  in.initrd_size = 0x0BCD'EF01;
  in.rsdp_addr = 0xE0000;
  in.e820 = e820_map(512u << 20);
  const auto page = build_boot_params(image, in);
  ASSERT_EQ(page.size(), 4096u);
  // The header copy, then the loader's own fields over it.
  EXPECT_EQ(get32(page, 0x202), 0x53726448u);
  EXPECT_EQ(get16(page, 0x206), 0x020F);
  EXPECT_EQ(get32(page, 0x260), k.init_size);
  EXPECT_EQ(page[0x210], 0xFF);
  EXPECT_EQ(page[0x211], 0x81);  // LOADED_HIGH | CAN_USE_HEAP
  EXPECT_EQ(get16(page, 0x224), 0xFE00);
  EXPECT_EQ(get32(page, 0x228), 0x20000u);
  EXPECT_EQ(get32(page, 0x0C8), 0u);
  EXPECT_EQ(get32(page, 0x218), 0x1234'5000u);
  EXPECT_EQ(get32(page, 0x21C), 0x0BCD'EF01u);
  EXPECT_EQ(get32(page, 0x0C0), 0u);
  EXPECT_EQ(get32(page, 0x0C4), 0u);
  EXPECT_EQ(get64(page, 0x070), 0xE0000u);
  ASSERT_EQ(page[0x1E8], 3);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(get64(page, 0x2D0 + 20 * i), in.e820[i].addr);
    EXPECT_EQ(get64(page, 0x2D0 + 20 * i + 8), in.e820[i].size);
    EXPECT_EQ(get32(page, 0x2D0 + 20 * i + 16), static_cast<std::uint32_t>(in.e820[i].type));
  }
  // The sentinel (0x1EF) stays 0: the kernel then trusts every field.
  EXPECT_EQ(page[0x1EF], 0);
  // Nothing else was written below the header.
  for (std::size_t i = 0; i < 0x1F1; ++i) {
    const bool ours = (i >= 0x070 && i < 0x078) || i == 0x1E8;
    if (!ours) {
      EXPECT_EQ(page[i], 0) << "offset 0x" << std::hex << i;
    }
  }
}

TEST(BootParams, HighHalvesGoToTheExtFields) {
  const auto file = SyntheticKernel{}.build();
  const auto image = parse_bzimage(file, "k");
  BootParamsInput in;
  in.cmdline_addr = 0x1'0002'0000;
  in.initrd_addr = 0x2'0000'1000;
  in.initrd_size = 0x3'0000'0002;
  const auto page = build_boot_params(image, in);
  EXPECT_EQ(get32(page, 0x228), 0x0002'0000u);
  EXPECT_EQ(get32(page, 0x0C8), 1u);
  EXPECT_EQ(get32(page, 0x218), 0x1000u);
  EXPECT_EQ(get32(page, 0x0C0), 2u);
  EXPECT_EQ(get32(page, 0x21C), 2u);
  EXPECT_EQ(get32(page, 0x0C4), 3u);
}

TEST(BootParams, NoRsdpAddressBeforeProtocol214) {
  SyntheticKernel k;
  k.protocol = 0x020D;
  const auto file = k.build();
  BootParamsInput in;
  in.rsdp_addr = 0xE0000;
  const auto page = build_boot_params(parse_bzimage(file, "k"), in);
  EXPECT_EQ(get64(page, 0x070), 0u);
}

TEST(CommandLine, UpToCmdlineSizeWithItsNul) {
  SyntheticKernel k;
  k.cmdline_size = 10;
  const auto file = k.build();
  const auto image = parse_bzimage(file, "k");
  const auto bytes = command_line_bytes(image, "0123456789");
  ASSERT_EQ(bytes.size(), 11u);
  EXPECT_EQ(bytes.back(), 0);
  try {
    command_line_bytes(image, "0123456789A");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage);
    EXPECT_THAT(e.what(), HasSubstr("command line is 11 bytes, longer than the 10 bytes this kernel accepts"));
  }
}

TEST(CommandLine, RefusesAnEmbeddedNul) {
  const auto file = SyntheticKernel{}.build();
  const auto image = parse_bzimage(file, "k");
  EXPECT_THROW(command_line_bytes(image, std::string_view("console=ttyS0\0x", 15)), Error);
}

TEST(CommandLine, CappedByTheLayoutsArea) {
  SyntheticKernel k;
  k.cmdline_size = 1u << 20;
  const auto file = k.build();
  const auto image = parse_bzimage(file, "k");
  EXPECT_NO_THROW(command_line_bytes(image, std::string(kCmdlineRegionBytes - 1, 'a')));
  try {
    command_line_bytes(image, std::string(kCmdlineRegionBytes, 'a'));
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("capped by lockvisor's command-line area"));
  }
}

}  // namespace
}  // namespace lockvisor::linuxboot
