#include "vmm/devices/power_ports.h"

#include <cstring>

#include <fmt/format.h>

namespace lockvisor::devices {
namespace lb = linuxboot;

std::vector<PowerPorts::Range> PowerPorts::claimed_ports(const lb::PowerControl& control) {
  std::vector<Range> ranges;
  if (control.model == lb::AcpiPowerModel::kFixedHardware) {
    ranges.push_back({lb::kPm1aEventPort, 4});
    ranges.push_back({lb::kPm1aControlPort, 2});
  } else {
    ranges.push_back({lb::kSleepControlPort, 1});
    ranges.push_back({lb::kSleepStatusPort, 1});
  }
  ranges.push_back({control.reset_port, 1});
  ranges.push_back({kI8042Command, 1});
  return ranges;
}

PowerPorts::Request PowerPorts::decode(std::uint16_t port, std::uint64_t value, unsigned width) const {
  if (control_.is_poweroff(port, value, width)) return Request::kPowerOff;
  if (control_.is_reset(port, value, width)) return Request::kReset;
  if (port == kI8042Command && (value & 0xFF) == kI8042PulseReset) return Request::kReset;
  // SLP_EN with another sleep type: a suspend this machine cannot do.
  if (port == control_.sleep_port && (value & control_.sleep_enable) != 0) return Request::kOtherSleep;
  return Request::kNone;
}

bool PowerPorts::on_io(VcpuContext& vcpu, const kvm::VcpuExit::PortIo& io) {
  if (!io.write) {
    std::memset(io.data.data(), 0, io.data.size());
    // SCI_EN (bit 0) of PM1a control: always in ACPI mode.
    if (control_.model == lb::AcpiPowerModel::kFixedHardware && io.port == lb::kPm1aControlPort)
      for (std::uint32_t i = 0; i < io.count; ++i) io.data[std::size_t{i} * io.size] = 1;
    return true;
  }
  for (std::uint32_t i = 0; i < io.count; ++i) {
    std::uint64_t value = 0;
    std::memcpy(&value, io.data.data() + std::size_t{i} * io.size, io.size);
    switch (decode(io.port, value, io.size)) {
      case Request::kNone:
        break;
      case Request::kPowerOff:
        return vcpu.end_run(0, "the guest powered off (ACPI S5)");
      case Request::kReset:
        return vcpu.end_run(0, fmt::format("the guest reset the machine (port {:#x})", io.port));
      case Request::kOtherSleep:
        return vcpu.guest_error(
            fmt::format("ACPI sleep request {:#x} at port {:#x}: only S5 (power off) is supported", value, io.port));
    }
  }
  return true;
}

}  // namespace lockvisor::devices
