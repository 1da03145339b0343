// Tests for the RISC-V VMM's device tree: the header's fields, dtc's reading
// of the whole blob (every node and property the guest or the specification
// needs, decompiled without a warning), and the refusals.
#include "vmm/arch/riscv64/fdt_writer.h"

#include <fmt/format.h>

#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "lockvisor/abi/riscv_boot.h"
#include "tests/support/command_output.h"
#include "vmm/util/error.h"
#include "vmm/util/scratch_dir.h"

namespace lockvisor::arch::riscv64 {
namespace {

FdtMachine machine(std::uint32_t harts) {
  return {.ram_base = abi::kRiscvRamBase,
          .ram_bytes = 0x1000'0000,
          .harts = harts,
          .timebase_hz = 10'000'000,
          .isa = "rv64imafdch",
          .boot_info_gpa = abi::kRiscvBootInfoGpa};
}

std::uint32_t be32_at(const std::vector<std::byte>& blob, std::size_t offset) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i) v = (v << 8) | std::to_integer<std::uint32_t>(blob.at(offset + i));
  return v;
}

// dtc's source form of `blob`, with its warnings (2>&1): "" and a test
// failure when dtc cannot read it.
std::string decompile(const std::vector<std::byte>& blob) {
  const ScratchDir dir("lockvisor-fdt-test", "the device tree test");
  const auto path = dir.path() / "machine.dtb";
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(blob.data()),
                                               static_cast<std::streamsize>(blob.size()));
  const auto result = test::run_command("dtc -I dtb -O dts " + path.string());
  EXPECT_EQ(result.exit_code, 0) << "dtc (package device-tree-compiler, tools/install-deps.sh): " << result.output;
  return result.exit_code == 0 ? result.output : "";
}

TEST(FdtWriter, HeaderIsVersion17WithConsistentOffsets) {
  const auto blob = build_fdt(machine(2));
  EXPECT_EQ(be32_at(blob, 0), 0xd00dfeedu);
  EXPECT_EQ(be32_at(blob, 4), blob.size());  // totalsize
  const std::uint32_t struct_off = be32_at(blob, 8);
  const std::uint32_t strings_off = be32_at(blob, 12);
  EXPECT_EQ(be32_at(blob, 20), 17u);
  EXPECT_EQ(be32_at(blob, 24), 16u);
  EXPECT_EQ(struct_off + be32_at(blob, 36), strings_off);      // size_dt_struct
  EXPECT_EQ(strings_off + be32_at(blob, 32), blob.size());    // size_dt_strings
  EXPECT_EQ(be32_at(blob, struct_off), 1u);                    // FDT_BEGIN_NODE of the root
  EXPECT_EQ(be32_at(blob, strings_off - 4), 9u);               // FDT_END
}

TEST(FdtWriter, DtcReadsTheNodesTheGuestNeeds) {
  const std::string dts = decompile(build_fdt(machine(3)));
  EXPECT_EQ(dts.find("Warning"), std::string::npos) << dts;
  EXPECT_NE(dts.find("memory@80000000 {"), std::string::npos) << dts;
  EXPECT_NE(dts.find("reg = <0x00 0x80000000 0x00 0x10000000>;"), std::string::npos) << dts;
  EXPECT_NE(dts.find("timebase-frequency = <0x989680>;"), std::string::npos) << dts;
  EXPECT_NE(dts.find("cpu@0 {"), std::string::npos) << dts;
  EXPECT_NE(dts.find("cpu@2 {"), std::string::npos) << dts;
  EXPECT_EQ(dts.find("cpu@3 {"), std::string::npos) << dts;
  EXPECT_NE(dts.find("riscv,isa = \"rv64imafdch\";"), std::string::npos) << dts;
  EXPECT_NE(dts.find("lockvisor,boot-info = <0x00 0x80100000>;"), std::string::npos) << dts;
}

TEST(FdtWriter, NoBootInfoPropertyWhenThereIsNone) {
  FdtMachine m = machine(1);
  m.boot_info_gpa = 0;
  const std::string dts = decompile(build_fdt(m));
  EXPECT_NE(dts.find("chosen {"), std::string::npos) << dts;
  EXPECT_EQ(dts.find("lockvisor,boot-info"), std::string::npos) << dts;
}

TEST(FdtWriter, EveryHartTheGuestAllowsFits) {
  const auto blob = build_fdt(machine(abi::kRiscvMaxHarts));
  EXPECT_LE(blob.size(), abi::kRiscvFdtMaxBytes);
  const std::string dts = decompile(blob);
  EXPECT_NE(dts.find(fmt::format("cpu@{:x} {{", abi::kRiscvMaxHarts - 1)), std::string::npos);
}

TEST(FdtWriter, RefusesNoHartsAndNoRam) {
  EXPECT_THROW(build_fdt(machine(0)), Error);
  FdtMachine m = machine(1);
  m.ram_bytes = 0;
  EXPECT_THROW(build_fdt(m), Error);
}

}  // namespace
}  // namespace lockvisor::arch::riscv64
