// parse_bzimage: the fields of a good header, and one refusal per kind of
// bad file, each naming the problem.
#include "vmm/linuxboot/bzimage.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/linux/synthetic_bzimage.h"
#include "vmm/util/error.h"

namespace lockvisor::linuxboot {
namespace {

using ::testing::HasSubstr;
using testing::SyntheticKernel;

std::string refusal(const std::vector<std::uint8_t>& file) {
  try {
    parse_bzimage(file, "vmlinuz-test");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage);
    return e.what();
  }
  ADD_FAILURE() << "parse_bzimage accepted the file";
  return "";
}

TEST(BzImage, ParsesAGoodHeader) {
  SyntheticKernel k;
  const auto file = k.build();
  const BzImage image = parse_bzimage(file, "vmlinuz-test");
  EXPECT_EQ(image.protocol, 0x020F);
  EXPECT_EQ(image.setup_sects, 4u);
  EXPECT_EQ(image.payload_offset, 5u * 512);
  EXPECT_EQ(image.payload_size, k.payload_bytes);
  EXPECT_EQ(image.init_size, k.init_size);
  EXPECT_EQ(image.pref_address, k.pref_address);
  EXPECT_EQ(image.kernel_alignment, k.kernel_alignment);
  EXPECT_TRUE(image.relocatable);
  EXPECT_EQ(image.cmdline_size, 2047u);
  EXPECT_EQ(image.initrd_addr_max, 0x7FFFFFFFu);
  EXPECT_EQ(image.xloadflags, 0x7F);
  EXPECT_EQ(image.loadflags, 0x01);
  // The header copy runs from 0x1F1 to 0x202 + byte[0x201].
  ASSERT_EQ(image.setup_header.size(), 0x26Cu - 0x1F1);
  EXPECT_TRUE(std::equal(image.setup_header.begin(), image.setup_header.end(), file.begin() + 0x1F1));
  const auto payload = image.payload(file);
  EXPECT_EQ(payload.data(), file.data() + 5 * 512);
  EXPECT_EQ(payload.size(), k.payload_bytes);
}

TEST(BzImage, SetupSectsZeroMeansFour) {
  SyntheticKernel k;
  k.setup_sects = 0;
  const auto file = k.build();
  const BzImage image = parse_bzimage(file, "k");
  EXPECT_EQ(image.setup_sects, 4u);
  EXPECT_EQ(image.payload_offset, 5u * 512);
}

TEST(BzImage, RefusesAnEmptyFile) { EXPECT_THAT(refusal({}), HasSubstr("vmlinuz-test is empty")); }

TEST(BzImage, RefusesAnElfFile) {
  std::vector<std::uint8_t> elf(4096, 0);
  elf[0] = 0x7F, elf[1] = 'E', elf[2] = 'L', elf[3] = 'F';
  EXPECT_THAT(refusal(elf), HasSubstr("is an ELF file (a vmlinux?), not a bzImage"));
  elf.resize(64);  // also when shorter than a header
  EXPECT_THAT(refusal(elf), HasSubstr("is an ELF file"));
}

TEST(BzImage, RefusesGzipData) {
  std::vector<std::uint8_t> gz(4096, 0);
  gz[0] = 0x1F, gz[1] = 0x8B;
  EXPECT_THAT(refusal(gz), HasSubstr("gzip-compressed data, not a bzImage"));
}

TEST(BzImage, RefusesATooShortFile) {
  EXPECT_THAT(refusal(std::vector<std::uint8_t>(100, 0x90)), HasSubstr("too short to be a bzImage: 100 bytes"));
}

TEST(BzImage, RefusesAFileWithoutHdrS) {
  auto file = SyntheticKernel{}.build();
  file[0x202] = 'X';
  EXPECT_THAT(refusal(file), HasSubstr("no \"HdrS\" setup header at offset 0x202"));
}

TEST(BzImage, RefusesAFileWithoutTheBootFlag) {
  auto file = SyntheticKernel{}.build();
  file[0x1FE] = 0;
  EXPECT_THAT(refusal(file), HasSubstr("no boot flag 0xAA55 at offset 0x1FE (found 0xAA00)"));
}

TEST(BzImage, RefusesAnOldProtocol) {
  SyntheticKernel k;
  k.protocol = 0x020B;
  EXPECT_THAT(refusal(k.build()), HasSubstr("uses boot protocol 2.11, older than the 2.12 lockvisor needs"));
}

TEST(BzImage, RefusesAKernelWithout64BitEntry) {
  SyntheticKernel k;
  k.xloadflags = 0x7E;
  EXPECT_THAT(refusal(k.build()), HasSubstr("has no 64-bit entry point (xloadflags 0x007E lacks XLF_KERNEL_64)"));
}

TEST(BzImage, RefusesATruncatedPayload) {
  SyntheticKernel k;
  auto file = k.build();
  file.resize(file.size() - 100);
  EXPECT_THAT(refusal(file), HasSubstr("is truncated: the setup header announces 2560 setup bytes and a 65536-byte "
                                       "payload (68096 bytes in all), the file has 67996"));
}

TEST(BzImage, RefusesAFileCutInsideTheSetupCode) {
  auto file = SyntheticKernel{}.build();
  file.resize(0x400);
  EXPECT_THAT(refusal(file), HasSubstr("is truncated"));
}

TEST(BzImage, RefusesAFileCutInsideTheHeader) {
  auto file = SyntheticKernel{}.build();
  file.resize(0x240);
  EXPECT_THAT(refusal(file), HasSubstr("is truncated: 576 bytes, its setup header ends at 0x26C"));
}

TEST(BzImage, RefusesAHeaderEndOutsideTheBootParamsSlot) {
  SyntheticKernel k;
  k.header_jump = 0xA0;  // 0x2A2 > 0x290
  EXPECT_THAT(refusal(k.build()), HasSubstr("setup header ending at 0x2A2"));
}

TEST(BzImage, RefusesABadKernelAlignment) {
  SyntheticKernel k;
  k.kernel_alignment = 0x300000;
  EXPECT_THAT(refusal(k.build()), HasSubstr("kernel_alignment 0x300000, not a power of two"));
}

}  // namespace
}  // namespace lockvisor::linuxboot
