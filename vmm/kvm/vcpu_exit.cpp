#include "vmm/kvm/vcpu_exit.h"

#include <fmt/format.h>

namespace lockvisor::kvm {

VcpuExit decode_exit(kvm_run& run, std::size_t run_bytes) {
  VcpuExit exit;
  exit.reason = run.exit_reason;
  switch (run.exit_reason) {
    case KVM_EXIT_IO: {
      const auto& io = run.io;
      const std::uint64_t bytes = std::uint64_t{io.size} * io.count;
      const std::uint64_t end = std::uint64_t{io.data_offset} + bytes;
      const bool size_ok = io.size == 1 || io.size == 2 || io.size == 4;
      if (!size_ok || io.count == 0 || end > run_bytes) {
        exit.kind = VcpuExit::Kind::kMalformed;
        exit.what = fmt::format("malformed port I/O exit (port {:#x}, size {}, count {})", io.port, io.size, io.count);
        return exit;
      }
      exit.kind = VcpuExit::Kind::kPortIo;
      exit.io.port = io.port;
      exit.io.size = io.size;
      exit.io.count = io.count;
      exit.io.write = io.direction == KVM_EXIT_IO_OUT;
      exit.io.data = {reinterpret_cast<std::uint8_t*>(&run) + io.data_offset, static_cast<std::size_t>(bytes)};
      return exit;
    }
    case KVM_EXIT_MMIO:
      if (run.mmio.len == 0 || run.mmio.len > sizeof(run.mmio.data)) {
        exit.kind = VcpuExit::Kind::kMalformed;
        exit.what = fmt::format("malformed MMIO exit (GPA {:#x}, length {})", run.mmio.phys_addr, run.mmio.len);
        return exit;
      }
      exit.kind = VcpuExit::Kind::kMmio;
      exit.mmio.gpa = run.mmio.phys_addr;
      exit.mmio.len = run.mmio.len;
      exit.mmio.write = run.mmio.is_write != 0;
      exit.mmio.data = {run.mmio.data, run.mmio.len};
      return exit;
    case KVM_EXIT_HLT:
      exit.kind = VcpuExit::Kind::kHalt;
      return exit;
    case KVM_EXIT_SHUTDOWN:
      exit.kind = VcpuExit::Kind::kShutdown;
      return exit;
    case KVM_EXIT_SYSTEM_EVENT:
      exit.kind = VcpuExit::Kind::kSystemEvent;
      exit.system_event = run.system_event.type;
      return exit;
    case KVM_EXIT_INTR:
      exit.kind = VcpuExit::Kind::kIntr;
      return exit;
    case KVM_EXIT_INTERNAL_ERROR:
      exit.kind = VcpuExit::Kind::kInternalError;
      exit.suberror = run.internal.suberror;
      return exit;
    case KVM_EXIT_FAIL_ENTRY:
      exit.kind = VcpuExit::Kind::kFailEntry;
      exit.hardware_reason = run.fail_entry.hardware_entry_failure_reason;
      return exit;
    default:
      exit.kind = VcpuExit::Kind::kUnknown;
      return exit;
  }
}

}  // namespace lockvisor::kvm
