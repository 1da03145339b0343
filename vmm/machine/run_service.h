// A RunService is something that works alongside a running VM on the
// Machine's monitor thread: the preemption injector's schedules, the control
// socket, the timeline's samplers. The Machine starts each one after the VM
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

#include "vmm/machine/run_result.h"

namespace lockvisor::pvlock {
class PvBackend;
}

namespace lockvisor::machine {

class RunControl;
class VcpuRunner;

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
  virtual void start(RunContext& context) = 0;
  // The run has ended and every vCPU thread has left its loop. Cancel timers
  // and sockets here.
  virtual void stop() = 0;
  // Adds what the service measured to the run's result (optional).
  virtual void report(RunResult& /*result*/) {}
};

}  // namespace lockvisor::machine
