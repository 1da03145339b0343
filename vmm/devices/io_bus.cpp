#include "vmm/devices/io_bus.h"

#include <algorithm>
#include <cstring>

#include "vmm/util/error.h"

namespace lockvisor::devices {

void IoBus::add_ports(std::uint16_t first, std::uint32_t count, PortDevice& device, ExitKind kind) {
  const std::uint32_t end = std::uint32_t{first} + count;
  if (count == 0 || end > 0x10000) fail_host("I/O bus: bad port range {:#x}+{}", first, count);
  for (const auto& r : ports_)
    if (first < r.end && r.first < end) fail_host("I/O bus: port {:#x}+{} is already claimed", first, count);
  ports_.push_back({first, end, {&device, kind}});
  // A handful of ranges: a sorted vector searched linearly beats a map.
  std::sort(ports_.begin(), ports_.end(), [](const PortRange& a, const PortRange& b) { return a.first < b.first; });
}

void IoBus::add_mmio(std::uint64_t first, std::uint64_t bytes, MmioDevice& device, ExitKind kind) {
  const std::uint64_t end = first + bytes;
  if (bytes == 0 || end < first) fail_host("I/O bus: bad MMIO range {:#x}+{}", first, bytes);
  for (const auto& r : mmio_)
    if (first < r.end && r.first < end) fail_host("I/O bus: MMIO {:#x}+{} is already claimed", first, bytes);
  mmio_.push_back({first, end, {&device, kind}});
}

IoBus::PortClaim IoBus::port(std::uint16_t port) const {
  for (const auto& r : ports_)
    if (port >= r.first && port < r.end) return r.claim;
  return {};
}

IoBus::MmioClaim IoBus::mmio(std::uint64_t gpa, std::uint32_t len) const {
  for (const auto& r : mmio_)
    if (gpa >= r.first && gpa + len <= r.end && gpa + len >= gpa) return r.claim;
  return {};
}

void float_high(const kvm::VcpuExit::PortIo& io) {
  if (!io.write) std::memset(io.data.data(), 0xFF, io.data.size());
}

}  // namespace lockvisor::devices
