// The ports through which a Linux guest turns the machine off or resets it,
// as its ACPI tables describe them (power_control.h):
// the PM1a control register (fixed-hardware ACPI) or the sleep control
// register (HW-reduced ACPI) for power-off, the FADT's RESET_REG, and the
// 8042 keyboard controller's pulse-reset command (0xFE to port 0x64), which
// Linux tries when the ACPI reset does not take. Either request ends the run
// (lockvisor never reboots a guest); a sleep state other than S5 is refused
// as a guest error (no suspend here).
//
// Reads: PM1a control reads SCI_EN (the system is always in ACPI mode, so
// the kernel never tries to switch it through an SMI command port); PM1a
// enable reads back what was last written (ACPICA checks that it took, or
// reports that the Global Lock cannot be used); every other claimed register
// reads 0 (no wake events, controller idle).
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "vmm/devices/io_bus.h"
#include "vmm/devices/power_control.h"

namespace lockvisor::devices {

class PowerPorts final : public PortDevice {
 public:
  static constexpr std::uint16_t kI8042Command = 0x64;
  static constexpr std::uint8_t kI8042PulseReset = 0xFE;

  explicit PowerPorts(PowerControl control) : control_(control) {}

  struct Range {
    std::uint16_t first;
    std::uint32_t count;
  };
  // The ports this device answers for `control`'s power model.
  static std::vector<Range> claimed_ports(const PowerControl& control);

  enum class Request { kNone, kPowerOff, kReset, kOtherSleep };
  // What a write of `value` (`width` bytes) to `port` asks for.
  Request decode(std::uint16_t port, std::uint64_t value, unsigned width) const;

  bool on_io(VcpuContext& vcpu, const kvm::VcpuExit::PortIo& io) override;

 private:
  PowerControl control_;
  std::atomic<std::uint16_t> pm1_enable_{0};
};

}  // namespace lockvisor::devices
