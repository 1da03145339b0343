// The ports of lockvisor's own freestanding guest (hypercalls/include/
// lockvisor/abi/doorbell.h): the KVM and SBI hypercall doorbells, the report
// channel (ucall), the exception report, the bare-exit port and a transmit-
// only COM1. Each is a device on the VM's I/O bus (io_bus.h), registered only
// for that guest: a Linux guest sees none of them.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "vmm/kvm/guest_memory.h"
#include "vmm/devices/io_bus.h"
#include "vmm/machine/report_channel.h"
#include "vmm/machine/run_result.h"
#include "vmm/pvlock/hypercall_table.h"

namespace lockvisor::machine {

// The bus's vocabulary, as the machine layer uses it.
using devices::ExitCounts;
using devices::exit_total;
using devices::ExitKind;
using devices::float_high;
using devices::IoBus;
using devices::kExitKindCount;
using devices::kExitKindNames;
using devices::MmioDevice;
using devices::PortDevice;
using devices::VcpuContext;
using kvm::VcpuExit;

class RunControl;

// What the freestanding ports need from the vCPU beyond VcpuContext: the
// program's life cycle as the report channel tells it.
class GuestProgramContext : public VcpuContext {
 public:
  virtual void note_hypercall(std::uint64_t number) = 0;
  // The guest's own exception report names the faulting RIP: the state
  // lines show that one, not the report port's.
  virtual void note_fault_rip(std::uint64_t rip) = 0;
  // The program finished (code 0: success) or failed an assertion.
  virtual bool program_done(std::uint64_t exit_code) = 0;
  virtual bool program_failed(std::string what) = 0;
  // A targeted preemption point (abi::UcallType::kPreemptPoint): park for
  // the returned time, or a guest error with the refusal.
  struct PreemptVerdict {
    std::chrono::nanoseconds park{0};
    std::string refused;
  };
  virtual PreemptVerdict preempt_point(std::span<const std::byte> memory, const std::uint64_t (&args)[3]) = 0;
  virtual void park(std::chrono::nanoseconds duration) = 0;

 protected:
  ~GuestProgramContext() = default;
};

// Ports 0xE4 (KVM ABI) and 0xE5 (SBI ABI): the hypercall table decides what
// a call does, this applies it to the registers (and halts when it says so).
class HypercallPorts final : public PortDevice {
 public:
  explicit HypercallPorts(const pvlock::HypercallTable& table) : table_(table) {}
  bool on_io(VcpuContext& vcpu, const VcpuExit::PortIo& io) override;

 private:
  const pvlock::HypercallTable& table_;
};

// Port 0xE7: a CPL0 exception handler's report (vector, error code, RIP,
// CR2); always ends the run as a guest fault.
class FaultPort final : public PortDevice {
 public:
  bool on_io(VcpuContext& vcpu, const VcpuExit::PortIo& io) override;
};

// Port 0xE8: does nothing; the cheapest exit there is (doorbell benchmarks).
class NopPort final : public PortDevice {
 public:
  bool on_io(VcpuContext& vcpu, const VcpuExit::PortIo& io) override;
};

// COM1 (0x3F8-0x3FF), transmit only: bytes written to THR go to the serial
// console, charged against the guest's serial budget; LSR reads "transmitter
// empty", every other register 0.
class Com1Transmitter final : public PortDevice {
 public:
  explicit Com1Transmitter(RunControl& control) : control_(control) {}
  bool on_io(VcpuContext& vcpu, const VcpuExit::PortIo& io) override;

 private:
  RunControl& control_;
};

// Port 0xE6: the report channel (report_channel.h). Each vCPU has its own
// decoder state, touched only by that vCPU's thread.
class ReportChannelPort final : public PortDevice {
 public:
  ReportChannelPort(RunControl& control, const kvm::GuestMemory& memory, unsigned vcpus);
  bool on_io(VcpuContext& vcpu, const VcpuExit::PortIo& io) override;
  // After the run (the vCPU thread has been joined): moves what vCPU
  // `index` reported into its report. Call once per vCPU.
  void fill(unsigned index, VcpuReport& report);

 private:
  struct PerVcpu {
    explicit PerVcpu(GuestBudget& budget) : report(budget) {}
    GuestReport report;
    std::optional<std::uint64_t> exit_code;
    std::optional<metrics::ThreadUsage> window_start, window_end;
  };
  RunControl& control_;
  const kvm::GuestMemory& memory_;
  std::vector<std::unique_ptr<PerVcpu>> vcpus_;
};

}  // namespace lockvisor::machine
