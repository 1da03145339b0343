// One VM run from start to report: builds the VM from a MachineConfig, runs
// one host thread per vCPU, and watches them from the calling thread with a
// Boost.Asio event loop (the --timeout watchdog, the deadlock detector, and
// SIGINT/SIGTERM/SIGHUP as StopSignals hands them over). The exit loop itself
// lives in vcpu_runner.cpp.
#pragma once
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>

#include "vmm/util/unique_fd.h"

#include "vmm/kvm/kvm_system.h"
#include "vmm/machine/machine_config.h"
#include "vmm/machine/run_result.h"
#include "vmm/machine/run_service.h"
#include "vmm/machine/stop_signals.h"

namespace lockvisor::trace {
class Trace;
}

namespace lockvisor::machine {

class Machine {
 public:
  // Validates the configuration and builds the VM; throws lockvisor::Error
  // with a one-line message for bad input, and Interrupted (below) when a
  // stop signal has already arrived: no VM is built after SIGINT/SIGTERM.
  Machine(const kvm::KvmSystem& kvm, MachineConfig config, std::span<const std::byte> image,
          std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::now());
  ~Machine();
  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;

  // Runs the VM to its end. Every way of ending (all vCPUs done, guest fault,
  // --timeout, deadlock, SIGINT/SIGTERM/SIGHUP via StopScope) returns here
  // promptly: see "Every wait ends when the run stops" in machine.cpp.
  RunResult run();

  // Something that works alongside the running VM (run_service.h): the
  // preemption injector, the control socket, the trace. Add before run().
  void add_service(std::unique_ptr<RunService> service);

  // --trace (docs/trace.md): records this run's timeline into `trace`
  // (which must outlive run()): allocates its lanes, gives lock workloads a
  // lock-trace log in guest memory, hooks the vCPU loops and the backend's
  // kicks, samples host preemptions, and after the run reads the guest's
  // log and writes the clock's measured error into the trace's metadata.
  // Call once, before run().
  void attach_trace(trace::Trace& trace);

 private:
  struct State;
  void map_runstate_page(const kvm::KvmSystem& kvm);
  void finish_trace();
  std::unique_ptr<State> state_;
};

// Throws lockvisor::Error (one line) for a configuration no VM can have;
// needs no KVM, so front ends call it before opening /dev/kvm.
void validate_config(const MachineConfig& config);

// What this host's KVM cannot do for `config`, as one line (lockvisor::Error,
// usage kind: exit 2): --backend kvm and --guest-ring 0 on PVM (vmcall never
// completes; CPL0 is emulated at ~1 us per instruction), --ple off without
// KVM_CAP_X86_DISABLE_EXITS(PAUSE). The Machine calls it; front ends may call
// it first to refuse before anything runs.
void validate_host(const MachineConfig& config, const kvm::KvmSystem& kvm);

// Checks the guest image and that --memory fits it and the vCPU stacks,
// also without KVM. Throws lockvisor::Error ("guest image: ...").
void validate_image(const MachineConfig& config, std::span<const std::byte> image);

// Smallest --memory (MiB) that fits the image and the vCPU stacks.
std::uint64_t minimum_memory_mib(unsigned vcpus, std::uint64_t image_end);

}  // namespace lockvisor::machine
