#include "vmm/linuxboot/acpi_tables.h"

#include <string_view>

#include "vmm/linuxboot/le_bytes.h"
#include "vmm/util/error.h"

namespace lockvisor::linuxboot {
namespace {

constexpr std::string_view kOemId = "LOCKVS";         // 6 characters
constexpr std::string_view kOemTableId = "LOCKVISR";  // 8 characters
constexpr std::string_view kCreatorId = "LKVS";       // 4 characters
constexpr std::uint32_t kOemRevision = 1;
constexpr std::uint32_t kCreatorRevision = 1;

constexpr std::size_t kHeaderBytes = 36;
constexpr std::size_t kRsdpBytes = 36;
constexpr std::size_t kFadtBytes = 276;  // ACPI 6.0+ FADT, through the hypervisor vendor identity
constexpr std::size_t kFacsBytes = 64;
constexpr std::uint8_t kFadtRevision = 6;
constexpr std::uint8_t kFadtMinorRevision = 5;  // ACPI 6.5

// FADT flags (Table 5.10).
constexpr std::uint32_t kFadtWbinvd = 1u << 0;
constexpr std::uint32_t kFadtProcC1 = 1u << 2;
constexpr std::uint32_t kFadtPowerButton = 1u << 4;  // 1: no fixed-feature power button
constexpr std::uint32_t kFadtSleepButton = 1u << 5;  // 1: no fixed-feature sleep button
constexpr std::uint32_t kFadtResetRegSup = 1u << 10;
constexpr std::uint32_t kFadtHeadless = 1u << 12;
constexpr std::uint32_t kFadtHwReduced = 1u << 20;
// IA-PC boot architecture flags (Table 5.11).
constexpr std::uint16_t kBootArch8042 = 1u << 1;
constexpr std::uint16_t kBootArchNoVga = 1u << 2;
constexpr std::uint16_t kBootArchNoMsi = 1u << 3;
constexpr std::uint16_t kBootArchNoCmosRtc = 1u << 5;

// Generic Address Structure (5.2.3.2): space, bit width, bit offset, access size, address.
constexpr std::uint8_t kGasSystemIo = 1;
constexpr std::uint8_t kGasAccessByte = 1;
constexpr std::uint8_t kGasAccessUndefined = 0;

// MADT structure types and flags.
constexpr std::uint8_t kMadtLocalApic = 0;
constexpr std::uint8_t kMadtIoApic = 1;
constexpr std::uint8_t kMadtSourceOverride = 2;
constexpr std::uint8_t kMadtLocalApicNmi = 4;
constexpr std::uint32_t kMadtPcatCompat = 1u << 0;  // dual 8259 present (KVM's in-kernel PIC)
constexpr std::uint32_t kLocalApicEnabled = 1u << 0;
// MPS INTI flags: polarity bits 0-1 (01 active high), trigger bits 2-3 (11 level).
constexpr std::uint16_t kIntiActiveHighLevel = 0x000D;

// PM1 control (4.8.3.2.1) and HW-reduced sleep control (4.8.3.7) fields.
constexpr std::uint16_t kPm1SleepTypeShift = 10;
constexpr std::uint16_t kPm1SleepTypeMask = 0x7u << kPm1SleepTypeShift;
constexpr std::uint16_t kPm1SleepEnable = 1u << 13;
constexpr std::uint16_t kSleepCtlTypeShift = 2;
constexpr std::uint16_t kSleepCtlTypeMask = 0x7u << kSleepCtlTypeShift;
constexpr std::uint16_t kSleepCtlEnable = 1u << 5;

void put_gas(std::span<std::uint8_t> b, std::size_t at, std::uint8_t bit_width, std::uint8_t access,
             std::uint64_t port) {
  put8(b, at, kGasSystemIo);
  put8(b, at + 1, bit_width);
  put8(b, at + 2, 0);
  put8(b, at + 3, access);
  put64(b, at + 4, port);
}

// A table with its common header (5.2.6); the checksum is set by finish().
std::vector<std::uint8_t> table(std::string_view signature, std::size_t length, std::uint8_t revision) {
  std::vector<std::uint8_t> t(length, 0);
  put_chars(t, 0, signature);
  put32(t, 4, static_cast<std::uint32_t>(length));
  put8(t, 8, revision);
  put_chars(t, 10, kOemId);
  put_chars(t, 16, kOemTableId);
  put32(t, 24, kOemRevision);
  put_chars(t, 28, kCreatorId);
  put32(t, 32, kCreatorRevision);
  return t;
}

void finish(std::vector<std::uint8_t>& t) {
  put32(t, 4, static_cast<std::uint32_t>(t.size()));
  t[9] = 0;
  t[9] = checksum_byte(t);
}

std::vector<std::uint8_t> madt(unsigned vcpu_count, const AcpiOptions& options) {
  auto t = table("APIC", kHeaderBytes + 8, 4);
  put32(t, 36, kLocalApicAddr);
  put32(t, 40, kMadtPcatCompat);
  auto append = [&](std::initializer_list<std::uint8_t> entry) { t.insert(t.end(), entry); };
  for (unsigned i = 0; i < vcpu_count; ++i) {
    const auto id = static_cast<std::uint8_t>(i);
    append({kMadtLocalApic, 8, /*processor UID*/ id, /*APIC ID*/ id, 0, 0, 0, 0});
    put32(t, t.size() - 4, kLocalApicEnabled);
  }
  // The I/O APIC takes the first ID after the CPUs (the MP table uses the same).
  append({kMadtIoApic, 12, static_cast<std::uint8_t>(vcpu_count), 0, 0, 0, 0, 0, /*GSI base*/ 0, 0, 0, 0});
  put32(t, t.size() - 8, kIoApicAddr);
  if (options.irq0_to_gsi2) {
    append({kMadtSourceOverride, 10, /*bus ISA*/ 0, /*IRQ*/ 0, 0, 0, 0, 0, 0, 0});
    put32(t, t.size() - 6, 2);
  }
  if (options.power_model == AcpiPowerModel::kFixedHardware) {
    append({kMadtSourceOverride, 10, 0, kSciIrq, 0, 0, 0, 0, 0, 0});
    put32(t, t.size() - 6, kSciIrq);
    put16(t, t.size() - 2, kIntiActiveHighLevel);
  }
  // LINT1 of every processor (UID 0xFF) is the NMI input, as on a PC.
  append({kMadtLocalApicNmi, 6, 0xFF, 0, 0, 1});
  finish(t);
  return t;
}

std::vector<std::uint8_t> fadt(const AcpiOptions& options, std::uint64_t dsdt, std::uint64_t facs) {
  auto t = table("FACP", kFadtBytes, kFadtRevision);
  const bool reduced = options.power_model == AcpiPowerModel::kHardwareReduced;
  put32(t, 36, static_cast<std::uint32_t>(facs));  // FIRMWARE_CTRL (X_FIRMWARE_CTRL stays 0)
  put32(t, 40, static_cast<std::uint32_t>(dsdt));
  put8(t, 45, 0);  // Preferred_PM_Profile: unspecified
  std::uint32_t flags = kFadtResetRegSup | kFadtHeadless;
  if (reduced) {
    flags |= kFadtHwReduced;
    put_gas(t, 244, 8, kGasAccessByte, kSleepControlPort);  // SLEEP_CONTROL_REG
    put_gas(t, 256, 8, kGasAccessByte, kSleepStatusPort);   // SLEEP_STATUS_REG
  } else {
    flags |= kFadtWbinvd | kFadtProcC1 | kFadtPowerButton | kFadtSleepButton;
    put16(t, 46, kSciIrq);  // SCI_INT; SMI_CMD (48) = 0: always in ACPI mode
    put32(t, 56, kPm1aEventPort);
    put32(t, 64, kPm1aControlPort);
    put8(t, 88, 4);          // PM1_EVT_LEN
    put8(t, 89, 2);          // PM1_CNT_LEN; PM_TMR_LEN (91) = 0: no PM timer
    put16(t, 96, 101);       // P_LVL2_LAT > 100: no C2
    put16(t, 98, 1001);      // P_LVL3_LAT > 1000: no C3
    put_gas(t, 148, 32, kGasAccessUndefined, kPm1aEventPort);   // X_PM1a_EVT_BLK
    put_gas(t, 172, 16, kGasAccessUndefined, kPm1aControlPort); // X_PM1a_CNT_BLK
  }
  std::uint16_t boot_arch = kBootArchNoVga | kBootArchNoMsi;
  if (!options.cmos_rtc) boot_arch |= kBootArchNoCmosRtc;
  if (options.i8042) boot_arch |= kBootArch8042;
  put16(t, 109, boot_arch);
  put32(t, 112, flags);
  put_gas(t, 116, 8, kGasAccessByte, kResetPort);  // RESET_REG
  put8(t, 128, kResetValue);
  put8(t, 131, kFadtMinorRevision);
  put64(t, 140, dsdt);  // X_DSDT
  put_chars(t, 268, kOemTableId);  // hypervisor vendor identity
  finish(t);
  return t;
}

std::vector<std::uint8_t> facs() {
  std::vector<std::uint8_t> f(kFacsBytes, 0);  // FACS has no checksum
  put_chars(f, 0, "FACS");
  put32(f, 4, kFacsBytes);
  put8(f, 32, 2);  // version
  return f;
}

std::uint64_t align16(std::uint64_t v) { return (v + 15) & ~std::uint64_t{15}; }
std::uint64_t align64(std::uint64_t v) { return (v + 63) & ~std::uint64_t{63}; }

}  // namespace

std::vector<std::uint8_t> dsdt_aml() {
  return {
      0x08,                    // NameOp
      '_', 'S', '5', '_',      // NameString _S5_, in the DSDT's root scope: \_S5_
      0x12,                    // PackageOp
      0x08,                    // PkgLength: 8 bytes, from this byte to the end of the package
      0x04,                    // NumElements
      0x0A, kS5SleepType,      // BytePrefix 5: SLP_TYPa
      0x0A, kS5SleepType,      // BytePrefix 5: SLP_TYPb
      0x00,                    // ZeroOp: reserved
      0x00,                    // ZeroOp: reserved
  };
}

AcpiTables build_acpi_tables(unsigned vcpu_count, std::uint64_t base, const AcpiOptions& options) {
  if (vcpu_count < 1 || vcpu_count > kMaxAcpiVcpus)
    fail("a Linux guest has 1 to {} vCPUs (xAPIC IDs in the MADT), {} asked", kMaxAcpiVcpus, vcpu_count);
  if (base % 16 != 0) fail("ACPI tables at 0x{:X}: the RSDP must be 16-byte aligned", base);
  const bool reduced = options.power_model == AcpiPowerModel::kHardwareReduced;

  // Addresses first (every table refers to others by address), then bytes.
  auto dsdt = table("DSDT", kHeaderBytes, 2);
  const auto aml = dsdt_aml();
  dsdt.insert(dsdt.end(), aml.begin(), aml.end());
  finish(dsdt);
  auto apic = madt(vcpu_count, options);

  const std::uint64_t rsdp_at = base;
  const std::uint64_t xsdt_at = align16(rsdp_at + kRsdpBytes);
  const std::uint64_t xsdt_bytes = kHeaderBytes + 2 * 8;
  const std::uint64_t rsdt_at = align16(xsdt_at + xsdt_bytes);
  const std::uint64_t rsdt_bytes = kHeaderBytes + 2 * 4;
  const std::uint64_t facs_at = reduced ? 0 : align64(rsdt_at + rsdt_bytes);
  const std::uint64_t fadt_at = align16(reduced ? rsdt_at + rsdt_bytes : facs_at + kFacsBytes);
  const std::uint64_t dsdt_at = align16(fadt_at + kFadtBytes);
  const std::uint64_t madt_at = align16(dsdt_at + dsdt.size());
  const std::uint64_t end = madt_at + apic.size();

  AcpiTables out;
  out.base = base;
  out.rsdp_addr = rsdp_at;
  out.bytes.assign(end - base, 0);
  auto place = [&](std::string_view signature, std::uint64_t at, const std::vector<std::uint8_t>& bytes) {
    std::copy(bytes.begin(), bytes.end(), out.bytes.begin() + static_cast<std::ptrdiff_t>(at - base));
    out.tables.push_back({std::string(signature), at, static_cast<std::uint32_t>(bytes.size())});
  };

  std::vector<std::uint8_t> rsdp(kRsdpBytes, 0);
  put_chars(rsdp, 0, "RSD PTR ");
  put_chars(rsdp, 9, kOemId);
  put8(rsdp, 15, 2);  // revision 2: ACPI 2.0+ with the XSDT
  put32(rsdp, 16, static_cast<std::uint32_t>(rsdt_at));
  put32(rsdp, 20, kRsdpBytes);
  put64(rsdp, 24, xsdt_at);
  rsdp[8] = checksum_byte(std::span(rsdp).first(20));  // ACPI 1.0 part
  rsdp[32] = checksum_byte(rsdp);                       // whole structure
  place("RSD PTR ", rsdp_at, rsdp);

  auto xsdt = table("XSDT", xsdt_bytes, 1);
  put64(xsdt, 36, fadt_at);
  put64(xsdt, 44, madt_at);
  finish(xsdt);
  place("XSDT", xsdt_at, xsdt);
  auto rsdt = table("RSDT", rsdt_bytes, 1);
  put32(rsdt, 36, static_cast<std::uint32_t>(fadt_at));
  put32(rsdt, 40, static_cast<std::uint32_t>(madt_at));
  finish(rsdt);
  place("RSDT", rsdt_at, rsdt);
  if (!reduced) place("FACS", facs_at, facs());
  place("FACP", fadt_at, fadt(options, dsdt_at, facs_at));
  place("DSDT", dsdt_at, dsdt);
  place("APIC", madt_at, apic);

  PowerControl& power = out.power;
  power.model = options.power_model;
  if (reduced) {
    power.sleep_port = kSleepControlPort;
    power.sleep_width = 1;
    power.sleep_enable = kSleepCtlEnable;
    power.sleep_type_mask = kSleepCtlTypeMask;
    power.sleep_type_s5 = static_cast<std::uint16_t>(kS5SleepType << kSleepCtlTypeShift);
  } else {
    power.sleep_port = kPm1aControlPort;
    power.sleep_width = 2;
    power.sleep_enable = kPm1SleepEnable;
    power.sleep_type_mask = kPm1SleepTypeMask;
    power.sleep_type_s5 = static_cast<std::uint16_t>(kS5SleepType << kPm1SleepTypeShift);
  }
  return out;
}

}  // namespace lockvisor::linuxboot
