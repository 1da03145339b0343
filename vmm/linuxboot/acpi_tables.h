// ACPI tables for a Linux guest: RSDP, XSDT (and RSDT), FADT, FACS, DSDT,
// MADT, built as one contiguous block at a fixed guest-physical address.
//
// Format: ACPI Specification 6.5 (UEFI Forum, 2022): 5.2.5 RSDP, 5.2.6 the
// common table header and checksum, 5.2.7/5.2.8 RSDT/XSDT, 5.2.9 FADT (field
// offsets in Table 5.9, flags in 5.10, IA-PC boot architecture flags in
// 5.11), 5.2.10 FACS, 5.2.12 MADT (Local APIC 5.2.12.2, I/O APIC 5.2.12.3,
// Interrupt Source Override 5.2.12.5, Local APIC NMI 5.2.12.7), 5.2.11.1
// DSDT, 7.4.2 the \_Sx sleep-state packages, 4.8.3.7 PM1 control register
// (SLP_TYP bits 10-12, SLP_EN bit 13), 4.8.3.7/4.8.4 the HW-reduced sleep
// control register (SLP_TYP bits 2-4, SLP_EN bit 5), 20.2 AML encoding.
//
// Two ways to describe power management, chosen by AcpiOptions::power_model:
//
// kFixedHardware (the default): a classic FADT with a PM1a event block
//   (0x600, 4 bytes) and a PM1a control block (0x604, 2 bytes) in I/O
//   space, SCI on IRQ 9, no SMI command port (so the system is always in
//   ACPI mode), no PM timer, and a FACS. Linux 6.1 then keeps its legacy x86
//   set-up: the 8259 PIC and the 8254 PIT (KVM_CREATE_IRQCHIP and
//   KVM_CREATE_PIT2 provide both) calibrate the TSC and the LAPIC timer and
//   serve as the early clock event. The VMM must answer the PM1 ports
//   (PIO exits, they are not in the kernel's irqchip): PM1a status (0x600,
//   2 bytes) reads 0; PM1a enable (0x602, 2 bytes) reads back what was last
//   written (ACPICA checks that the GBL_EN bit sticks, else it logs "No
//   response from Global Lock hardware, disabling lock"); PM1a_CNT (0x604)
//   reads SCI_EN (1); writes are ignored but for the power-off write; the
//   VMM never raises the SCI.
//
// kHardwareReduced: FADT flag HW_REDUCED_ACPI, no PM1 blocks, no SCI, no
//   FACS; sleep control/status registers at I/O ports 0x608/0x609 (one
//   byte each), as Firecracker and Cloud Hypervisor do. Linux 6.1 then runs
//   acpi_generic_reduced_hw_init() (arch/x86/kernel/acpi/boot.c): it sets
//   x86_init.timers.timer_init to a no-op and replaces the 8259 with
//   null_legacy_pic, so no PIT and no PIC are used even when the VMM created
//   them. The kernel then needs another way to know the TSC frequency (the
//   kvmclock CPUID bits from KVM_GET_SUPPORTED_CPUID, or CPUID leaf 0x15/
//   0x16/0x40000010) to calibrate the LAPIC timer; and with the null legacy
//   PIC the kernel counts no legacy ISA IRQs ("preallocated irqs: 0"), while
//   this DSDT describes no UART device, so whether the 8250 at 0x3F8 gets
//   IRQ 4 wired through the I/O APIC is untested here. Fewer I/O ports to
//   emulate, more dependence on the CPUID the VMM gives.
//
// Measured (a throwaway VMM on this plan, in the nested-KVM machine:
// kvm_amd under QEMU TCG, Debian 6.1.0-57 kernels, busybox initramfs whose
// /init powers off): with KVM's CPUID (leaf 1 ECX bit 31 "hypervisor" set,
// KVM's 0x40000000/0x40000001 leaves) both models boot to /init with 2-8
// vCPUs ("Hypervisor detected: KVM", kvm-clock, "PV spinlocks enabled")
// and power off: linux-image-amd64 + kFixedHardware writes 0x3401 to 0x604,
// linux-image-cloud-amd64 + kHardwareReduced writes 0x34 to 0x608. Without
// the hypervisor CPUID bit (no kvm-clock) kFixedHardware still boots (the
// PIT ticks), while the cloud kernel with kHardwareReduced stops for good
// after "tsc: Unable to calibrate against PIT" with its clock at 0.000000.
//
// Either way PowerControl says which guest writes mean "power off" and
// "reset"; the FADT's RESET_REG is I/O port 0xCF9, value 0x06, in both.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "vmm/devices/power_control.h"

namespace lockvisor::linuxboot {

// The power and reset registers these tables describe are the power ports'
// (vmm/devices/power_control.h); the tables use their names as their own.
using devices::AcpiPowerModel;
using devices::PowerControl;
using devices::kPm1aControlPort;
using devices::kPm1aEventPort;
using devices::kResetPort;
using devices::kResetValue;
using devices::kS5SleepType;
using devices::kSleepControlPort;
using devices::kSleepStatusPort;

struct AcpiOptions {
  AcpiPowerModel power_model = AcpiPowerModel::kFixedHardware;
  // Interrupt Source Override ISA IRQ 0 -> GSI 2 (a PC's 8254 wired to I/O
  // APIC pin 2). KVM's default GSI routing (arch/x86/kvm/irq_comm.c,
  // default_routing: GSI n -> I/O APIC pin n and PIC line n) sends the
  // in-kernel PIT's GSI 0 to I/O APIC pin 0, so leave this off unless the
  // VMM installs a routing that maps GSI 0 to pin 2 (KVM_SET_GSI_ROUTING, as
  // QEMU does); the MP table follows the same choice. Measured with it off:
  // Linux 6.1 reports "..TIMER: vector=0x30 apic1=0 pin1=0" and uses pin 0
  // without complaint.
  bool irq0_to_gsi2 = false;
  bool cmos_rtc = false;  // an MC146818 RTC at ports 0x70/0x71 is emulated
  bool i8042 = false;     // an 8042 keyboard controller at 0x60/0x64 is emulated
};

inline constexpr std::uint8_t kSciIrq = 9;
inline constexpr std::uint32_t kIoApicAddr = 0xFEC00000;
inline constexpr std::uint32_t kLocalApicAddr = 0xFEE00000;

struct AcpiTableInfo {
  std::string signature;  // "RSD PTR " for the RSDP, else the 4-character table signature
  std::uint64_t addr = 0;
  std::uint32_t length = 0;
};

struct AcpiTables {
  std::uint64_t base = 0;   // guest-physical address of bytes[0]; the RSDP is there
  std::vector<std::uint8_t> bytes;
  std::uint64_t rsdp_addr = 0;
  std::vector<AcpiTableInfo> tables;  // RSDP first, then each table
  PowerControl power;
};

// The most vCPUs the MADT describes: xAPIC IDs are 8 bits and 0xFF is the
// broadcast ID; the I/O APIC takes the ID after the last CPU.
inline constexpr unsigned kMaxAcpiVcpus = 254;

// One enabled Processor Local APIC per vCPU, APIC ID = processor UID = vCPU
// index; `base` must be 16-byte aligned. Fails (bad input) for a vCPU count
// outside 1..kMaxAcpiVcpus.
AcpiTables build_acpi_tables(unsigned vcpu_count, std::uint64_t base, const AcpiOptions& options);

// The DSDT's AML body: Name (\_S5_, Package () { 5, 5, 0, 0 }).
std::vector<std::uint8_t> dsdt_aml();

}  // namespace lockvisor::linuxboot
