#include "vmm/linuxboot/mp_table.h"

#include <string_view>

#include "vmm/linuxboot/acpi_tables.h"
#include "vmm/linuxboot/le_bytes.h"
#include "vmm/util/error.h"

namespace lockvisor::linuxboot {
namespace {

constexpr std::size_t kFloatingBytes = 16;
constexpr std::size_t kHeaderBytes = 44;
constexpr std::uint8_t kSpecRevision = 4;  // MP spec 1.4

constexpr std::uint8_t kEntryProcessor = 0, kEntryBus = 1, kEntryIoApic = 2, kEntryIoInterrupt = 3,
                       kEntryLocalInterrupt = 4;
constexpr std::uint8_t kCpuEnabled = 1u << 0, kCpuBootstrap = 1u << 1;
constexpr std::uint8_t kLocalApicVersion = 0x14;  // an integrated xAPIC (what KVM's LAPIC reports)
constexpr std::uint8_t kIoApicVersion = 0x11;     // KVM's in-kernel I/O APIC version register
// CPU signature (family 6) and feature flags (FPU, APIC) for processor entries;
// Linux reads the real values from CPUID, these only have to be plausible.
constexpr std::uint32_t kCpuSignature = 0x600;
constexpr std::uint32_t kCpuFeatures = (1u << 0) | (1u << 9);
constexpr std::uint8_t kIntInt = 0, kIntNmi = 1, kIntExtInt = 3;
constexpr std::uint8_t kAllLocalApics = 0xFF;
constexpr unsigned kIsaIrqs = 16;

}  // namespace

MpTable build_mp_table(unsigned vcpu_count, std::uint64_t base, bool irq0_to_gsi2) {
  if (vcpu_count < 1 || vcpu_count > kMaxAcpiVcpus)
    fail("a Linux guest has 1 to {} vCPUs (8-bit APIC IDs in the MP table), {} asked", kMaxAcpiVcpus, vcpu_count);
  if (base % 16 != 0) fail("MP floating pointer at 0x{:X}: it must be 16-byte aligned", base);
  const auto ioapic_id = static_cast<std::uint8_t>(vcpu_count);

  std::vector<std::uint8_t> config(kHeaderBytes, 0);
  unsigned entries = 0;
  auto append = [&](std::initializer_list<std::uint8_t> entry) {
    config.insert(config.end(), entry);
    ++entries;
  };
  for (unsigned i = 0; i < vcpu_count; ++i) {
    append({kEntryProcessor, static_cast<std::uint8_t>(i), kLocalApicVersion,
            static_cast<std::uint8_t>(kCpuEnabled | (i == 0 ? kCpuBootstrap : 0)),
            0, 0, 0, 0, /*features*/ 0, 0, 0, 0, /*reserved*/ 0, 0, 0, 0, 0, 0, 0, 0});
    put32(config, config.size() - 16, kCpuSignature);
    put32(config, config.size() - 12, kCpuFeatures);
  }
  append({kEntryBus, /*bus id*/ 0, 'I', 'S', 'A', ' ', ' ', ' '});
  append({kEntryIoApic, ioapic_id, kIoApicVersion, /*enabled*/ 1, 0, 0, 0, 0});
  put32(config, config.size() - 4, kIoApicAddr);
  // ISA IRQs 0-15 to I/O APIC pins; IRQ 2 is the 8259 cascade and has no
  // device (its pin carries IRQ 0 with irq0_to_gsi2). Flags 0: conforming
  // to the ISA bus (edge, active high).
  for (unsigned irq = 0; irq < kIsaIrqs; ++irq) {
    if (irq == 2) continue;
    const auto pin = static_cast<std::uint8_t>(irq == 0 && irq0_to_gsi2 ? 2 : irq);
    append({kEntryIoInterrupt, kIntInt, 0, 0, /*bus*/ 0, static_cast<std::uint8_t>(irq), ioapic_id, pin});
  }
  // LINT0: ExtINT (the 8259 in virtual-wire mode); LINT1: NMI; on every CPU.
  append({kEntryLocalInterrupt, kIntExtInt, 0, 0, 0, 0, kAllLocalApics, 0});
  append({kEntryLocalInterrupt, kIntNmi, 0, 0, 0, 0, kAllLocalApics, 1});

  put_chars(config, 0, "PCMP");
  put16(config, 4, static_cast<std::uint16_t>(config.size()));
  put8(config, 6, kSpecRevision);
  put_chars(config, 8, "LOCKVISR");      // OEM ID, 8 characters
  put_chars(config, 16, "LINUX GUEST ");  // product ID, 12 characters
  put16(config, 34, static_cast<std::uint16_t>(entries));
  put32(config, 36, kLocalApicAddr);
  config[7] = checksum_byte(config);

  MpTable out;
  out.base = base;
  out.config_addr = base + kFloatingBytes;
  out.config_length = static_cast<std::uint32_t>(config.size());
  out.entry_count = entries;
  out.bytes.assign(kFloatingBytes, 0);
  put_chars(out.bytes, 0, "_MP_");
  put32(out.bytes, 4, static_cast<std::uint32_t>(out.config_addr));
  put8(out.bytes, 8, 1);  // length in 16-byte units
  put8(out.bytes, 9, kSpecRevision);
  // Feature byte 1 = 0: a configuration table is present; byte 2 bit 7
  // (IMCRP) = 0: virtual-wire mode, so the kernel does not touch the IMCR.
  out.bytes[10] = checksum_byte(out.bytes);
  out.bytes.insert(out.bytes.end(), config.begin(), config.end());
  return out;
}

}  // namespace lockvisor::linuxboot
