// The Intel MP table: checksums, lengths, entry counts and order, the
// entries' contents.
#include "vmm/linuxboot/mp_table.h"

#include <gtest/gtest.h>

#include "vmm/linuxboot/le_bytes.h"
#include "vmm/util/error.h"

namespace lockvisor::linuxboot {
namespace {

constexpr std::uint64_t kBase = 0xF0000;

std::size_t entry_bytes(std::uint8_t type) { return type == 0 ? 20 : 8; }

TEST(MpTable, ChecksumsLengthsAndEntries) {
  for (unsigned n : {1u, 4u, 64u, 254u}) {
    for (bool irq0_to_gsi2 : {false, true}) {
      const MpTable mp = build_mp_table(n, kBase, irq0_to_gsi2);
      const std::span<const std::uint8_t> all(mp.bytes);
      const auto fp = all.first(16);
      EXPECT_EQ(std::string(fp.begin(), fp.begin() + 4), "_MP_");
      EXPECT_EQ(get32(fp, 4), mp.config_addr);
      EXPECT_EQ(fp[8], 1);
      EXPECT_EQ(fp[9], 4);
      EXPECT_EQ(byte_sum(fp), 0);
      EXPECT_EQ(fp[11], 0) << "configuration table present, not a default configuration";
      ASSERT_EQ(mp.config_addr, kBase + 16);
      const auto config = all.subspan(16);
      ASSERT_EQ(config.size(), mp.config_length);
      EXPECT_EQ(std::string(config.begin(), config.begin() + 4), "PCMP");
      EXPECT_EQ(get16(config, 4), config.size());
      EXPECT_EQ(config[6], 4);
      EXPECT_EQ(byte_sum(config), 0);
      EXPECT_EQ(get32(config, 36), 0xFEE00000u);
      EXPECT_EQ(get16(config, 34), mp.entry_count);

      // Walk the entries: types never decrease (spec order), sizes add up.
      std::size_t at = 44;
      unsigned processors = 0, buses = 0, ioapics = 0, io_ints = 0, local_ints = 0;
      std::uint8_t last_type = 0;
      std::vector<unsigned> pins(16, 99);
      for (unsigned e = 0; e < mp.entry_count; ++e) {
        ASSERT_LT(at, config.size());
        const std::uint8_t type = config[at];
        EXPECT_GE(type, last_type);
        last_type = type;
        switch (type) {
          case 0:
            EXPECT_EQ(config[at + 1], processors) << "APIC ID";
            EXPECT_EQ(config[at + 3], processors == 0 ? 3 : 1) << "enabled, BSP only on CPU 0";
            ++processors;
            break;
          case 1:
            EXPECT_EQ(std::string(config.begin() + at + 2, config.begin() + at + 8), "ISA   ");
            ++buses;
            break;
          case 2:
            EXPECT_EQ(config[at + 1], n) << "I/O APIC ID after the CPUs, as in the MADT";
            EXPECT_EQ(config[at + 3], 1);
            EXPECT_EQ(get32(config, at + 4), 0xFEC00000u);
            ++ioapics;
            break;
          case 3:
            EXPECT_EQ(config[at + 6], n) << "destination I/O APIC";
            pins.at(config[at + 5]) = config[at + 7];
            ++io_ints;
            break;
          case 4:
            EXPECT_EQ(config[at + 6], 0xFF);
            ++local_ints;
            break;
          default:
            FAIL() << "entry type " << int(type);
        }
        at += entry_bytes(type);
      }
      EXPECT_EQ(at, config.size());
      EXPECT_EQ(processors, n);
      EXPECT_EQ(buses, 1u);
      EXPECT_EQ(ioapics, 1u);
      EXPECT_EQ(io_ints, 15u);
      EXPECT_EQ(local_ints, 2u);
      EXPECT_EQ(pins[0], irq0_to_gsi2 ? 2u : 0u);
      EXPECT_EQ(pins[2], 99u) << "IRQ 2 (cascade) unassigned";
      for (unsigned irq = 3; irq < 16; ++irq) {
        EXPECT_EQ(pins[irq], irq);
      }
    }
  }
}

TEST(MpTable, RefusesVcpuCountsOutsideTheApicIdRange) {
  EXPECT_THROW(build_mp_table(0, kBase, false), Error);
  EXPECT_THROW(build_mp_table(255, kBase, false), Error);
}

}  // namespace
}  // namespace lockvisor::linuxboot
