// ACPI tables: checksums, lengths, the links between tables, the MADT's
// entries, the FADT's power-management registers in both models, and (when
// Debian's acpica-tools is installed) a decode by ACPICA's own disassembler.
#include "vmm/linuxboot/acpi_tables.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "tests/support/ci_required.h"
#include "vmm/linuxboot/le_bytes.h"
#include "vmm/util/error.h"

namespace lockvisor::linuxboot {
namespace {

using ::testing::HasSubstr;

constexpr std::uint64_t kBase = 0xE0000;

struct Parsed {
  AcpiTables tables;
  std::map<std::string, std::span<const std::uint8_t>> by_signature;
};

Parsed build(unsigned vcpus, const AcpiOptions& options = {}) {
  Parsed p{build_acpi_tables(vcpus, kBase, options), {}};
  for (const auto& t : p.tables.tables)
    p.by_signature[t.signature] = std::span<const std::uint8_t>(p.tables.bytes).subspan(t.addr - kBase, t.length);
  return p;
}

std::string sig_at(std::span<const std::uint8_t> bytes, std::size_t offset, std::size_t n) {
  return std::string(bytes.begin() + offset, bytes.begin() + offset + n);
}

// MADT entries of one type.
std::vector<std::span<const std::uint8_t>> madt_entries(std::span<const std::uint8_t> madt, std::uint8_t type) {
  std::vector<std::span<const std::uint8_t>> out;
  for (std::size_t at = 44; at < madt.size();) {
    const std::uint8_t length = madt[at + 1];
    EXPECT_GE(length, 2);
    EXPECT_LE(at + length, madt.size());
    if (length < 2 || at + length > madt.size()) break;
    if (madt[at] == type) out.push_back(madt.subspan(at, length));
    at += length;
  }
  return out;
}

class AcpiBothModels : public ::testing::TestWithParam<AcpiPowerModel> {};

TEST_P(AcpiBothModels, EveryChecksumAndLengthIsRight) {
  AcpiOptions options;
  options.power_model = GetParam();
  const Parsed p = build(8, options);
  ASSERT_EQ(p.tables.rsdp_addr, kBase);
  const auto rsdp = p.by_signature.at("RSD PTR ");
  EXPECT_EQ(sig_at(rsdp, 0, 8), "RSD PTR ");
  EXPECT_EQ(rsdp[15], 2);
  EXPECT_EQ(byte_sum(rsdp.first(20)), 0);
  EXPECT_EQ(byte_sum(rsdp), 0);
  EXPECT_EQ(get32(rsdp, 20), 36u);
  for (const auto& t : p.tables.tables) {
    if (t.signature == "RSD PTR ") continue;
    const auto bytes = p.by_signature.at(t.signature);
    EXPECT_EQ(sig_at(bytes, 0, 4), t.signature);
    EXPECT_EQ(get32(bytes, 4), t.length) << t.signature;
    if (t.signature != "FACS") {
      EXPECT_EQ(byte_sum(bytes), 0) << t.signature;
    }
    EXPECT_EQ(t.addr % 16, 0u) << t.signature;
  }
  // No two tables overlap, and all are inside the block.
  for (std::size_t i = 1; i < p.tables.tables.size(); ++i)
    EXPECT_LE(p.tables.tables[i - 1].addr + p.tables.tables[i - 1].length, p.tables.tables[i].addr);
  EXPECT_EQ(p.tables.tables.back().addr + p.tables.tables.back().length, kBase + p.tables.bytes.size());
}

TEST_P(AcpiBothModels, TablesPointAtEachOther) {
  AcpiOptions options;
  options.power_model = GetParam();
  const Parsed p = build(2, options);
  std::map<std::string, std::uint64_t> addr;
  for (const auto& t : p.tables.tables) addr[t.signature] = t.addr;
  const auto rsdp = p.by_signature.at("RSD PTR ");
  EXPECT_EQ(get64(rsdp, 24), addr.at("XSDT"));
  EXPECT_EQ(get32(rsdp, 16), addr.at("RSDT"));
  const auto xsdt = p.by_signature.at("XSDT");
  ASSERT_EQ(xsdt.size(), 36u + 16);
  EXPECT_EQ(get64(xsdt, 36), addr.at("FACP"));
  EXPECT_EQ(get64(xsdt, 44), addr.at("APIC"));
  const auto rsdt = p.by_signature.at("RSDT");
  EXPECT_EQ(get32(rsdt, 36), addr.at("FACP"));
  EXPECT_EQ(get32(rsdt, 40), addr.at("APIC"));
  const auto fadt = p.by_signature.at("FACP");
  ASSERT_EQ(fadt.size(), 276u);
  EXPECT_EQ(get32(fadt, 40), addr.at("DSDT"));
  EXPECT_EQ(get64(fadt, 140), addr.at("DSDT"));
  if (GetParam() == AcpiPowerModel::kFixedHardware) {
    EXPECT_EQ(get32(fadt, 36), addr.at("FACS"));
    EXPECT_EQ(addr.at("FACS") % 64, 0u);
  } else {
    EXPECT_EQ(p.by_signature.count("FACS"), 0u);
    EXPECT_EQ(get32(fadt, 36), 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, AcpiBothModels,
                         ::testing::Values(AcpiPowerModel::kFixedHardware, AcpiPowerModel::kHardwareReduced),
                         [](const auto& info) {
                           return info.param == AcpiPowerModel::kFixedHardware ? "FixedHardware" : "HardwareReduced";
                         });

TEST(AcpiMadt, OneEnabledLocalApicPerVcpu) {
  for (unsigned n : {1u, 2u, 64u, kMaxAcpiVcpus}) {
    const Parsed p = build(n);
    const auto madt = p.by_signature.at("APIC");
    EXPECT_EQ(get32(madt, 36), 0xFEE00000u);
    EXPECT_EQ(get32(madt, 40) & 1, 1u) << "PCAT_COMPAT";
    const auto lapics = madt_entries(madt, 0);
    ASSERT_EQ(lapics.size(), n);
    for (unsigned i = 0; i < n; ++i) {
      ASSERT_EQ(lapics[i].size(), 8u);
      EXPECT_EQ(lapics[i][2], i) << "processor UID";
      EXPECT_EQ(lapics[i][3], i) << "APIC ID";
      EXPECT_EQ(get32(lapics[i], 4), 1u) << "enabled";
    }
    const auto ioapics = madt_entries(madt, 1);
    ASSERT_EQ(ioapics.size(), 1u);
    EXPECT_EQ(ioapics[0][2], n) << "I/O APIC ID after the CPUs";
    EXPECT_EQ(get32(ioapics[0], 4), 0xFEC00000u);
    EXPECT_EQ(get32(ioapics[0], 8), 0u) << "GSI base";
    const auto nmis = madt_entries(madt, 4);
    ASSERT_EQ(nmis.size(), 1u);
    EXPECT_EQ(nmis[0][2], 0xFF);
    EXPECT_EQ(nmis[0][5], 1) << "LINT1";
  }
}

TEST(AcpiMadt, InterruptSourceOverrides) {
  {
    const Parsed p = build(4);  // fixed hardware, KVM's default routing: SCI only
    const auto isos = madt_entries(p.by_signature.at("APIC"), 2);
    ASSERT_EQ(isos.size(), 1u);
    EXPECT_EQ(isos[0][3], 9);
    EXPECT_EQ(get32(isos[0], 4), 9u);
    EXPECT_EQ(get16(isos[0], 8), 0x000D) << "level, active high";
  }
  {
    AcpiOptions o;
    o.irq0_to_gsi2 = true;
    o.power_model = AcpiPowerModel::kHardwareReduced;
    const Parsed p = build(4, o);
    const auto isos = madt_entries(p.by_signature.at("APIC"), 2);
    ASSERT_EQ(isos.size(), 1u);
    EXPECT_EQ(isos[0][2], 0) << "ISA bus";
    EXPECT_EQ(isos[0][3], 0) << "IRQ 0";
    EXPECT_EQ(get32(isos[0], 4), 2u) << "GSI 2";
  }
}

TEST(AcpiMadt, RefusesVcpuCountsOutsideTheApicIdRange) {
  for (unsigned n : {0u, kMaxAcpiVcpus + 1}) {
    try {
      build_acpi_tables(n, kBase, {});
      ADD_FAILURE() << n;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("1 to 254 vCPUs"));
    }
  }
}

TEST(AcpiFadt, FixedHardwareRegisters) {
  const Parsed p = build(1);
  const auto fadt = p.by_signature.at("FACP");
  EXPECT_EQ(fadt[8], 6) << "revision";
  EXPECT_EQ(get16(fadt, 46), 9) << "SCI_INT";
  EXPECT_EQ(get32(fadt, 48), 0u) << "no SMI_CMD: always in ACPI mode";
  EXPECT_EQ(get32(fadt, 56), kPm1aEventPort);
  EXPECT_EQ(get32(fadt, 64), kPm1aControlPort);
  EXPECT_EQ(get32(fadt, 76), 0u) << "no PM timer";
  EXPECT_EQ(fadt[88], 4);
  EXPECT_EQ(fadt[89], 2);
  EXPECT_EQ(fadt[91], 0);
  // X_PM1a_EVT_BLK / X_PM1a_CNT_BLK agree with the 32-bit fields.
  EXPECT_EQ(fadt[148], 1);
  EXPECT_EQ(fadt[149], 32);
  EXPECT_EQ(get64(fadt, 152), kPm1aEventPort);
  EXPECT_EQ(fadt[172], 1);
  EXPECT_EQ(fadt[173], 16);
  EXPECT_EQ(get64(fadt, 176), kPm1aControlPort);
  const std::uint32_t flags = get32(fadt, 112);
  EXPECT_EQ(flags & (1u << 20), 0u) << "not HW-reduced";
  EXPECT_NE(flags & (1u << 10), 0u) << "RESET_REG_SUP";
  // RESET_REG: I/O space, 8 bits, byte access, 0xCF9; value 6.
  EXPECT_EQ(fadt[116], 1);
  EXPECT_EQ(fadt[117], 8);
  EXPECT_EQ(fadt[119], 1);
  EXPECT_EQ(get64(fadt, 120), 0xCF9u);
  EXPECT_EQ(fadt[128], 6);
  // IA-PC boot architecture: no VGA, no MSI, no CMOS RTC, no 8042.
  EXPECT_EQ(get16(fadt, 109), (1u << 2) | (1u << 3) | (1u << 5));
  EXPECT_EQ(get64(fadt, 244), 0u) << "no sleep control register";
}

TEST(AcpiFadt, HardwareReducedRegisters) {
  AcpiOptions o;
  o.power_model = AcpiPowerModel::kHardwareReduced;
  o.cmos_rtc = true;
  o.i8042 = true;
  const Parsed p = build(1, o);
  const auto fadt = p.by_signature.at("FACP");
  EXPECT_NE(get32(fadt, 112) & (1u << 20), 0u) << "HW_REDUCED_ACPI";
  EXPECT_EQ(get16(fadt, 46), 0) << "no SCI";
  EXPECT_EQ(get32(fadt, 56), 0u);
  EXPECT_EQ(get32(fadt, 64), 0u);
  EXPECT_EQ(fadt[244], 1);
  EXPECT_EQ(fadt[245], 8);
  EXPECT_EQ(get64(fadt, 248), kSleepControlPort);
  EXPECT_EQ(fadt[256], 1);
  EXPECT_EQ(get64(fadt, 260), kSleepStatusPort);
  EXPECT_EQ(get64(fadt, 120), 0xCF9u);
  EXPECT_EQ(get16(fadt, 109), (1u << 1) | (1u << 2) | (1u << 3)) << "8042 present, RTC present";
  EXPECT_EQ(madt_entries(p.by_signature.at("APIC"), 2).size(), 0u) << "no SCI override";
}

TEST(AcpiDsdt, S5PackageAml) {
  const Parsed p = build(1);
  const auto dsdt = p.by_signature.at("DSDT");
  const auto aml = dsdt_aml();
  ASSERT_EQ(dsdt.size(), 36 + aml.size());
  EXPECT_TRUE(std::equal(aml.begin(), aml.end(), dsdt.begin() + 36));
  // NameOp "_S5_" PackageOp PkgLength NumElements ...
  EXPECT_EQ(aml[0], 0x08);
  EXPECT_EQ(sig_at(aml, 1, 4), "_S5_");
  EXPECT_EQ(aml[5], 0x12);
  EXPECT_EQ(aml[6], aml.size() - 6) << "PkgLength counts itself and what follows";
  EXPECT_EQ(aml[7], 4);
  EXPECT_EQ(aml[9], kS5SleepType);
}

TEST(PowerControl, FixedHardwarePoweroffAndReset) {
  const PowerControl pc = build(1).tables.power;
  EXPECT_EQ(pc.sleep_port, 0x604);
  EXPECT_EQ(pc.sleep_width, 2u);
  // Linux writes SLP_TYP alone, then SLP_TYP | SLP_EN (plus SCI_EN, bit 0).
  EXPECT_FALSE(pc.is_poweroff(0x604, 5u << 10 | 1, 2));
  EXPECT_TRUE(pc.is_poweroff(0x604, (5u << 10) | (1u << 13) | 1, 2));
  EXPECT_FALSE(pc.is_poweroff(0x604, (3u << 10) | (1u << 13), 2)) << "S3 is not power-off";
  EXPECT_FALSE(pc.is_poweroff(0x600, (5u << 10) | (1u << 13), 2));
  EXPECT_FALSE(pc.is_poweroff(0x604, (5u << 10) | (1u << 13), 1));
  EXPECT_TRUE(pc.is_reset(0xCF9, 0x06, 1));
  EXPECT_FALSE(pc.is_reset(0xCF9, 0x02, 1));
  EXPECT_FALSE(pc.is_reset(0xCF8, 0x06, 1));
  EXPECT_FALSE(pc.is_reset(0xCF9, 0x06, 4)) << "a dword to 0xCF8 region is PCI config, not reset";
}

TEST(PowerControl, HardwareReducedPoweroff) {
  AcpiOptions o;
  o.power_model = AcpiPowerModel::kHardwareReduced;
  const PowerControl pc = build(1, o).tables.power;
  EXPECT_EQ(pc.sleep_port, 0x608);
  EXPECT_EQ(pc.sleep_width, 1u);
  EXPECT_TRUE(pc.is_poweroff(0x608, (5u << 2) | (1u << 5), 1));
  EXPECT_FALSE(pc.is_poweroff(0x608, 5u << 2, 1));
  EXPECT_FALSE(pc.is_poweroff(0x609, (5u << 2) | (1u << 5), 1));
}

// ACPICA's disassembler (Debian acpica-tools) decodes each table: proof that
// a real ACPI implementation parses them. Skipped when iasl is not installed.
std::string run(const std::string& command) {
  std::string out;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return "popen failed";
  char buffer[4096];
  while (std::size_t n = fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
  const int status = pclose(pipe);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) out += "\n[iasl failed]";
  return out;
}

TEST(AcpiIasl, AcpicaDisassemblesEveryTable) {
  if (std::system("command -v iasl >/dev/null 2>&1") != 0)
    LOCKVISOR_SKIP_OUTSIDE_CI("iasl not installed (Debian: acpica-tools)");
  for (const auto model : {AcpiPowerModel::kFixedHardware, AcpiPowerModel::kHardwareReduced}) {
    AcpiOptions o;
    o.power_model = model;
    const Parsed p = build(3, o);
    char dir_template[] = "/tmp/lockvisor-acpi-XXXXXX";
    ASSERT_NE(mkdtemp(dir_template), nullptr);
    const std::filesystem::path dir = dir_template;
    for (const auto& [signature, bytes] : p.by_signature) {
      if (signature == "RSD PTR ") continue;  // iasl -d decodes tables with a standard header
      const auto dat = dir / (signature + ".dat");
      std::ofstream(dat, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                 static_cast<std::streamsize>(bytes.size()));
      const std::string log = run("cd " + dir.string() + " && iasl -d " + dat.filename().string());
      EXPECT_THAT(log, ::testing::Not(HasSubstr("[iasl failed]"))) << signature << ":\n" << log;
      std::ifstream dsl(dir / (signature + ".dsl"));
      std::stringstream text;
      text << dsl.rdbuf();
      const std::string decoded = text.str();
      EXPECT_FALSE(decoded.empty()) << signature;
      EXPECT_THAT(decoded, ::testing::Not(HasSubstr("Incorrect"))) << signature << ":\n" << decoded;
      EXPECT_THAT(decoded, ::testing::Not(HasSubstr("Error"))) << signature << ":\n" << decoded;
      if (signature == "DSDT") {
        EXPECT_THAT(decoded, HasSubstr("Name (_S5, Package (0x04)"));
      }
      if (signature == "APIC") {
        std::size_t count = 0;
        for (std::size_t at = 0; (at = decoded.find("[Processor Local APIC]", at)) != std::string::npos; ++at) ++count;
        EXPECT_EQ(count, 3u) << decoded;
      }
      if (signature == "FACP") {
        EXPECT_THAT(decoded, HasSubstr(model == AcpiPowerModel::kHardwareReduced ? "Hardware Reduced (V5) : 1"
                                                                                  : "Hardware Reduced (V5) : 0"));
      }
    }
    std::filesystem::remove_all(dir);
  }
}

// ACPICA itself (acpiexec, the same interpreter Linux uses, in Debian's
// acpica-tools) installs the FADT, FACS, MADT and DSDT, loads the DSDT's
// namespace and evaluates \_S5_ to the package the power-off path reads.
TEST(AcpiIasl, AcpicaLoadsTheTablesAndEvaluatesS5) {
  if (std::system("command -v acpiexec >/dev/null 2>&1") != 0)
    LOCKVISOR_SKIP_OUTSIDE_CI("acpiexec not installed (Debian: acpica-tools)");
  for (const auto model : {AcpiPowerModel::kFixedHardware, AcpiPowerModel::kHardwareReduced}) {
    AcpiOptions o;
    o.power_model = model;
    const Parsed p = build(4, o);
    char dir_template[] = "/tmp/lockvisor-acpi-XXXXXX";
    ASSERT_NE(mkdtemp(dir_template), nullptr);
    const std::filesystem::path dir = dir_template;
    std::string files;
    for (const std::string signature : {"DSDT", "FACP", "APIC", "FACS"}) {
      if (!p.by_signature.count(signature)) continue;
      const auto bytes = p.by_signature.at(signature);
      std::ofstream(dir / (signature + ".dat"), std::ios::binary)
          .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
      files += " " + signature + ".dat";
    }
    const std::string log = run("cd " + dir.string() + " && timeout 60 acpiexec -b 'Evaluate _S5_'" + files);
    std::filesystem::remove_all(dir);
    EXPECT_THAT(log, ::testing::Not(HasSubstr("[iasl failed]"))) << log;
    EXPECT_THAT(log, HasSubstr("1 ACPI AML tables successfully acquired and loaded")) << log;
    EXPECT_THAT(log, ::testing::Not(HasSubstr("ACPI Warning"))) << log;
    EXPECT_THAT(log, ::testing::Not(HasSubstr("ACPI Error"))) << log;
    EXPECT_THAT(log, ::testing::Not(HasSubstr("ACPI BIOS"))) << log;
    EXPECT_THAT(log, HasSubstr("[Package] Contains 4 Elements:\n"
                               "    [Integer] = 0000000000000005\n"
                               "    [Integer] = 0000000000000005\n")) << log;
  }
}

}  // namespace
}  // namespace lockvisor::linuxboot
