#include "vmm/devices/power_ports.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace lockvisor::devices {

std::vector<PowerPorts::Range> PowerPorts::claimed_ports(const PowerControl& control) {
  std::vector<Range> ranges;
  if (control.model == AcpiPowerModel::kFixedHardware) {
    ranges.push_back({kPm1aEventPort, 4});
    ranges.push_back({kPm1aControlPort, 2});
  } else {
    ranges.push_back({kSleepControlPort, 1});
    ranges.push_back({kSleepStatusPort, 1});
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
  const bool fixed = control_.model == AcpiPowerModel::kFixedHardware;
  // PM1a enable: the upper half of the 4-byte event block.
  const std::uint16_t enable_port = kPm1aEventPort + 2;
  if (!io.write) {
    std::memset(io.data.data(), 0, io.data.size());
    for (std::uint32_t i = 0; i < io.count; ++i) {
      std::uint8_t* at = io.data.data() + std::size_t{i} * io.size;
      if (fixed && io.port == kPm1aControlPort) at[0] = 1;  // SCI_EN: always in ACPI mode
      if (fixed && io.port == enable_port) {
        const std::uint16_t enable = pm1_enable_.load(std::memory_order_relaxed);
        std::memcpy(at, &enable, std::min<std::size_t>(io.size, sizeof enable));
      }
    }
    return true;
  }
  if (fixed && io.port == enable_port) {
    std::uint16_t enable = 0;
    std::memcpy(&enable, io.data.data() + std::size_t{io.count - 1} * io.size, std::min<std::size_t>(io.size, 2));
    pm1_enable_.store(enable, std::memory_order_relaxed);
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
