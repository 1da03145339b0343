// e820 map, kernel and initrd placement.
#include "vmm/linuxboot/linux_layout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/linux/synthetic_bzimage.h"
#include "vmm/util/error.h"

namespace lockvisor::linuxboot {
namespace {

using ::testing::HasSubstr;
using testing::SyntheticKernel;

constexpr std::uint64_t kMiB = 1ull << 20;

template <typename F>
std::string refusal(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage);
    return e.what();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

void expect_sorted_disjoint_and_covering(const std::vector<E820Entry>& map, std::uint64_t memory) {
  ASSERT_FALSE(map.empty());
  EXPECT_EQ(map.front().addr, 0u);
  for (std::size_t i = 0; i < map.size(); ++i) {
    EXPECT_GT(map[i].size, 0u);
    if (i > 0) {
      EXPECT_EQ(map[i - 1].addr + map[i - 1].size, map[i].addr) << "entry " << i;
    }
  }
  EXPECT_EQ(map.back().addr + map.back().size, memory);
}

TEST(E820, LowRamReservedLegacyAreaHighRam) {
  const auto map = e820_map(256 * kMiB);
  ASSERT_EQ(map.size(), 3u);
  EXPECT_EQ(map[0], (E820Entry{0, 0x9FC00, E820Type::kRam}));
  EXPECT_EQ(map[1], (E820Entry{0x9FC00, 0x100000 - 0x9FC00, E820Type::kReserved}));
  EXPECT_EQ(map[2], (E820Entry{0x100000, 255 * kMiB, E820Type::kRam}));
  expect_sorted_disjoint_and_covering(map, 256 * kMiB);
}

TEST(E820, TablesLiveInTheReservedArea) {
  const auto map = e820_map(64 * kMiB);
  for (std::uint64_t addr : {kAcpiAddr, kAcpiAddr + kAcpiRegionBytes - 1, kMpTableAddr, kMpTableAddr + kMpRegionBytes - 1}) {
    EXPECT_GE(addr, map[1].addr);
    EXPECT_LT(addr, map[1].addr + map[1].size);
  }
}

TEST(E820, MemoryCapBelowTheMmioHole) {
  expect_sorted_disjoint_and_covering(e820_map(kMaxMemoryBytes), kMaxMemoryBytes);
  EXPECT_THAT(refusal([] { e820_map(kMaxMemoryBytes + 4096); }),
              HasSubstr("at most 3072 MiB of memory (RAM must end below the 32-bit MMIO hole at 3 GiB)"));
  EXPECT_THAT(refusal([] { e820_map(64 * kMiB + 1); }), HasSubstr("not a whole number of 4 KiB pages"));
  EXPECT_THAT(refusal([] { e820_map(512 * 1024); }), HasSubstr("not a whole number of 4 KiB pages above 1 MiB"));
}

TEST(KernelPlacement, AtThePreferredAddress) {
  SyntheticKernel k;
  const auto file = k.build();
  const auto image = parse_bzimage(file, "k");
  const auto placed = place_kernel(image, 64 * kMiB);
  EXPECT_EQ(placed.addr, 16 * kMiB);
  EXPECT_EQ(placed.footprint, k.init_size);
}

TEST(KernelPlacement, FootprintCoversAPayloadLargerThanInitSize) {
  SyntheticKernel k;
  k.init_size = 4096;
  const auto file = k.build();
  const auto placed = place_kernel(parse_bzimage(file, "k"), 64 * kMiB);
  EXPECT_EQ(placed.footprint, k.payload_bytes);
}

TEST(KernelPlacement, RelocatableWithAnUnusablePreferenceGoesTo16MiBAligned) {
  SyntheticKernel k;
  k.pref_address = 0x1000;
  k.kernel_alignment = 32 * kMiB;
  const auto file = k.build();
  EXPECT_EQ(place_kernel(parse_bzimage(file, "k"), 128 * kMiB).addr, 32 * kMiB);
  k.pref_address = 17 * kMiB;  // not aligned to 2 MiB
  k.kernel_alignment = 2 * kMiB;
  const auto file2 = k.build();
  EXPECT_EQ(place_kernel(parse_bzimage(file2, "k"), 128 * kMiB).addr, 16 * kMiB);
}

TEST(KernelPlacement, RefusesANonRelocatableKernelBelow1MiB) {
  SyntheticKernel k;
  k.relocatable = 0;
  k.pref_address = 0x10000;
  const auto file = k.build();
  const auto image = parse_bzimage(file, "k");
  EXPECT_THAT(refusal([&] { place_kernel(image, 64 * kMiB); }), HasSubstr("not relocatable"));
}

TEST(KernelPlacement, RefusesMemoryTooSmallForInitSize) {
  SyntheticKernel k;
  k.init_size = 60 * kMiB;
  const auto file = k.build();
  const auto image = parse_bzimage(file, "k");
  EXPECT_THAT(refusal([&] { place_kernel(image, 64 * kMiB); }),
              HasSubstr("the kernel needs 76 MiB of guest memory (loaded at 0x1000000 with init_size 60 MiB), only 64 MiB"));
}

TEST(InitrdPlacement, HighestPageBelowMemoryEnd) {
  const auto file = SyntheticKernel{}.build();
  const auto image = parse_bzimage(file, "k");
  const auto placed = place_kernel(image, 256 * kMiB);
  const std::uint64_t addr = place_initrd(image, placed, 10 * kMiB + 5, 256 * kMiB);
  EXPECT_EQ(addr % 4096, 0u);
  EXPECT_LE(addr + 10 * kMiB + 5, 256 * kMiB);
  EXPECT_GT(addr + 10 * kMiB + 5 + 4096, 256 * kMiB);  // as high as it goes
  EXPECT_GE(addr, placed.end());
}

TEST(InitrdPlacement, RespectsInitrdAddrMax) {
  SyntheticKernel k;
  k.initrd_addr_max = 64 * kMiB - 1;  // last byte at or below 64 MiB - 1
  const auto file = k.build();
  const auto image = parse_bzimage(file, "k");
  const auto placed = place_kernel(image, 1024 * kMiB);
  const std::uint64_t size = 3 * kMiB;
  const std::uint64_t addr = place_initrd(image, placed, size, 1024 * kMiB);
  EXPECT_EQ(addr, 61 * kMiB);
  EXPECT_LE(addr + size - 1, k.initrd_addr_max);
}

TEST(InitrdPlacement, GoesBelowTheKernelWhenAboveIsFull) {
  SyntheticKernel k;
  k.initrd_addr_max = 25 * kMiB - 1;  // kernel is 16..24 MiB: 1 MiB free above it
  const auto file = k.build();
  const auto image = parse_bzimage(file, "k");
  const auto placed = place_kernel(image, 512 * kMiB);
  const std::uint64_t size = 5 * kMiB;
  const std::uint64_t addr = place_initrd(image, placed, size, 512 * kMiB);
  EXPECT_EQ(addr, 11 * kMiB);
  EXPECT_LE(addr + size, placed.addr);
  EXPECT_GE(addr, kHighMemoryStart);
}

TEST(InitrdPlacement, NeverOverlapsTheKernel) {
  const auto file = SyntheticKernel{}.build();
  const auto image = parse_bzimage(file, "k");
  for (std::uint64_t memory : std::initializer_list<std::uint64_t>{32 * kMiB, 33 * kMiB, 40 * kMiB, 100 * kMiB}) {
    const auto placed = place_kernel(image, memory);
    for (std::uint64_t size : std::initializer_list<std::uint64_t>{1, 4096ull, 7 * kMiB, 8 * kMiB - 1, 14 * kMiB}) {
      std::uint64_t addr = 0;
      try {
        addr = place_initrd(image, placed, size, memory);
      } catch (const Error&) {
        continue;  // refused: fine, as long as nothing overlaps when accepted
      }
      EXPECT_TRUE(addr + size <= placed.addr || addr >= placed.end()) << memory << " " << size;
      EXPECT_LE(addr + size, memory);
      EXPECT_GE(addr, kHighMemoryStart);
    }
  }
}

TEST(InitrdPlacement, RefusesAnInitrdThatFitsNowhere) {
  const auto file = SyntheticKernel{}.build();
  const auto image = parse_bzimage(file, "k");
  const auto placed = place_kernel(image, 32 * kMiB);  // kernel 16..24: 15 MiB below, 8 above
  EXPECT_THAT(refusal([&] { place_initrd(image, placed, 20 * kMiB, 32 * kMiB); }),
              HasSubstr("the initrd (20971520 bytes, 20 MiB) does not fit"));
  EXPECT_THAT(refusal([&] { place_initrd(image, placed, 20 * kMiB, 32 * kMiB); }),
              HasSubstr("the largest free range is 15 MiB"));
}

}  // namespace
}  // namespace lockvisor::linuxboot
