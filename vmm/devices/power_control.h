// The registers through which a guest powers the machine off or resets it:
// where they are and which writes mean what. The ACPI tables describe them
// to a Linux guest (vmm/linuxboot/acpi_tables.h builds a PowerControl with
// its tables) and the power ports answer them (power_ports.h), so both read
// the ports and values from here.
//
// Two power models, as the FADT declares them (ACPI 6.5, 4.8.3.7 and 4.8.4):
// kFixedHardware has a PM1a event block and a PM1a control register
// (SLP_TYP in bits 10-12, SLP_EN bit 13); kHardwareReduced has one-byte
// sleep control and status registers (SLP_TYP in bits 2-4, SLP_EN bit 5).
// Both reset through the FADT's RESET_REG.
#pragma once
#include <cstdint>

namespace lockvisor::devices {

enum class AcpiPowerModel { kFixedHardware, kHardwareReduced };

// I/O ports and values of the guest's power-off and reset requests.
inline constexpr std::uint16_t kPm1aEventPort = 0x600;   // 4 bytes: status (2), enable (2)
inline constexpr std::uint16_t kPm1aControlPort = 0x604; // 2 bytes
inline constexpr std::uint16_t kSleepControlPort = 0x608;  // HW-reduced, 1 byte
inline constexpr std::uint16_t kSleepStatusPort = 0x609;   // HW-reduced, 1 byte
inline constexpr std::uint16_t kResetPort = 0xCF9;
inline constexpr std::uint8_t kResetValue = 0x06;
// The SLP_TYP value the DSDT's \_S5_ package gives (both PM1a and PM1b);
// any value would do, the VMM only compares.
inline constexpr std::uint8_t kS5SleepType = 5;

struct PowerControl {
  AcpiPowerModel model = AcpiPowerModel::kFixedHardware;
  std::uint16_t sleep_port = 0;       // PM1a_CNT or SLEEP_CONTROL_REG
  unsigned sleep_width = 0;           // bytes per guest access there (2 or 1)
  std::uint16_t sleep_enable = 0;     // SLP_EN bit
  std::uint16_t sleep_type_mask = 0;  // SLP_TYP field
  std::uint16_t sleep_type_s5 = 0;    // SLP_TYP field holding kS5SleepType
  std::uint16_t reset_port = kResetPort;
  std::uint8_t reset_value = kResetValue;

  // A guest write of `value` (`width` bytes) to `port` asks to power off:
  // SLP_EN set with SLP_TYP = S5 in the sleep register. (Linux writes
  // SLP_TYP alone first, then with SLP_EN.)
  bool is_poweroff(std::uint16_t port, std::uint64_t value, unsigned width) const {
    return port == sleep_port && width == sleep_width && (value & sleep_enable) &&
           (value & sleep_type_mask) == sleep_type_s5;
  }
  // A guest write asks for a reset: a byte to the reset port with bit 2
  // ("reset CPU") set. The FADT value 0x06 has it, and so does the final
  // write of Linux's reboot=pci fallback (0x02, then 0x06).
  bool is_reset(std::uint16_t port, std::uint64_t value, unsigned width) const {
    return port == reset_port && width == 1 && (value & 0x04);
  }
};

}  // namespace lockvisor::devices
