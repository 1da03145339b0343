// A RunService is something that works alongside a running VM on the
// Machine's monitor thread: the preemption injector's schedules, the control
// socket, the timeline. When it is added to a built Machine, before_boot()
// may change the guest's memory and hook the vCPUs (the guest has not run
// one instruction yet). The Machine starts each one after the VM
// is built and before the first vCPU thread starts (so per-vCPU hooks such as
// VcpuRunner::on_parked are in place for the first instruction), and stops it
// once every vCPU thread has left its loop, before it builds the result.
//
// Invariants a service keeps:
//   - it runs only on `io` (the monitor thread's event loop): its handlers
//     never block, and every wait is an asynchronous timer or socket op;
//   - it never holds on to the context past stop(): the io_context, the
//     vCPUs and the RunControl are destroyed after the run returns;
//   - a service failure that should end the run calls control.end(...) with
//     Outcome::kHostError and a one-line reason; it never throws out of a
//     handler (that would tear down the monitor loop without a report).
#pragma once
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <span>
#include <string_view>

#include "vmm/machine/machine_config.h"
#include "vmm/machine/run_result.h"

namespace lockvisor::abi {
struct BootInfo;
}
namespace lockvisor::kvm {
class GuestMemory;
}
namespace lockvisor::pvlock {
class PvBackend;
}
namespace lockvisor::runstate {
class RunStatePage;
}

namespace lockvisor::machine {

class RunControl;
class VcpuRunner;

// The built VM, as a service sees it before the first instruction. Valid
// until the service's stop() returns.
struct BootContext {
  const MachineConfig& config;
  kvm::GuestMemory& memory;
  abi::BootInfo* boot_info;  // the freestanding guest's boot record; null for a Linux guest
  pvlock::PvBackend& backend;
  std::span<const std::unique_ptr<VcpuRunner>> vcpus;
  const runstate::RunStatePage* runstate_page;  // null: the page reads "unknown"
  std::string_view runstate_kind;
  std::string_view kvm_kind;
  std::uint64_t tsc_khz;
  std::chrono::steady_clock::time_point origin;  // the run's time zero
};

struct RunContext {
  boost::asio::io_context& io;
  RunControl& control;
  pvlock::PvBackend& backend;
  std::span<const std::unique_ptr<VcpuRunner>> vcpus;
  std::chrono::steady_clock::time_point origin;  // the run's time zero (Machine's origin)
};

class RunService {
 public:
  virtual ~RunService() = default;
  virtual void before_boot(BootContext& /*boot*/) {}
  // `context` stays valid until stop(): a service may keep it for the run.
  virtual void start(RunContext& context) = 0;
  // The run has ended and every vCPU thread has left its loop. Cancel timers
  // and sockets here.
  virtual void stop() = 0;
  // Adds what the service measured to the run's result (optional).
  virtual void report(RunResult& /*result*/) {}
};

}  // namespace lockvisor::machine
