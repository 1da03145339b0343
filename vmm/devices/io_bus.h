// The VM's I/O bus: which emulated device answers a port or MMIO exit.
//
// A device claims a range of ports (or of guest-physical addresses) once,
// before any vCPU runs; from then on the table is read-only, so vCPU threads
// look it up without a lock. A device's handler runs on the thread of the
// vCPU that exited, so a device shared by several vCPUs keeps its own state
// consistent (a mutex, atomics, or per-vCPU slots that only their vCPU's
// thread touches). A device sees the vCPU through VcpuContext: its index,
// its registers, and the ways its exit may end the run.
//
// An access nothing claims behaves as on a PC with nothing there: reads
// float high (all ones), writes are dropped; it is counted as "other_io" or
// "mmio".
#pragma once
#include <linux/kvm.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/devices/exit_kind.h"
#include "vmm/kvm/vcpu_exit.h"

namespace lockvisor::devices {

class VcpuContext {
 public:
  virtual unsigned index() const = 0;
  // The general registers at this exit (KVM_CAP_SYNC_REGS), and a request
  // to load them back at the next entry.
  virtual kvm_regs& regs() = 0;
  virtual void commit_regs() = 0;
  // Each returns false (leave the loop): the run ends with a guest fault
  // (exit code 3) or a host error (exit code 6) and this one-line reason,
  // prefixed by the vCPU and its RIP.
  virtual bool guest_error(std::string what) = 0;
  virtual bool host_error(std::string what) = 0;
  // The userspace halt (the PV backend's kick latch), ended by a kick, or
  // also by limit_ns when nonzero (HALT_FOR: then *expired says whether the
  // limit ended it); false when the run is stopping while the vCPU waited.
  virtual bool halt(std::uint64_t limit_ns, bool* expired) = 0;
  // The guest asked for the end of the whole run (a power-off): every vCPU
  // stops; the run completes when the guest's exit status (the one it
  // reported earlier, else `status`) is 0, and fails otherwise.
  virtual bool end_run(std::uint64_t status, std::string why) = 0;

 protected:
  ~VcpuContext() = default;
};

class PortDevice {
 public:
  virtual ~PortDevice() = default;
  // `io.data` holds io.size * io.count bytes: what the guest wrote, or where
  // the device puts what the guest reads. Returns whether the vCPU goes on.
  virtual bool on_io(VcpuContext& vcpu, const kvm::VcpuExit::PortIo& io) = 0;
};

class MmioDevice {
 public:
  virtual ~MmioDevice() = default;
  virtual bool on_mmio(VcpuContext& vcpu, const kvm::VcpuExit::Mmio& mmio) = 0;
};

class IoBus {
 public:
  // Claims ports [first, first + count) for `device` (which must outlive
  // the bus), counted under `kind`. Throws (an internal error) when a port
  // is already claimed.
  void add_ports(std::uint16_t first, std::uint32_t count, PortDevice& device, ExitKind kind);
  void add_mmio(std::uint64_t first, std::uint64_t bytes, MmioDevice& device, ExitKind kind);

  struct PortClaim {
    PortDevice* device = nullptr;  // null: nothing there
    ExitKind kind = ExitKind::kOtherIo;
  };
  struct MmioClaim {
    MmioDevice* device = nullptr;
    ExitKind kind = ExitKind::kMmio;
  };
  PortClaim port(std::uint16_t port) const;
  MmioClaim mmio(std::uint64_t gpa, std::uint32_t len) const;

 private:
  struct PortRange {
    std::uint32_t first, end;
    PortClaim claim;
  };
  struct MmioRange {
    std::uint64_t first, end;
    MmioClaim claim;
  };
  std::vector<PortRange> ports_;
  std::vector<MmioRange> mmio_;
};

// Reads of nothing: every byte 0xFF.
void float_high(const kvm::VcpuExit::PortIo& io);

}  // namespace lockvisor::devices
