// One VM run from start to report: builds the VM from a MachineConfig, runs
// one host thread per vCPU, and watches them from the calling thread with a
// Boost.Asio event loop (SIGINT/SIGTERM, the --timeout watchdog, the
// deadlock detector). The exit loop itself lives in vcpu_runner.cpp.
#pragma once
#include <chrono>
#include <cstddef>
#include <memory>
#include <span>

#include "vmm/kvm/kvm_system.h"
#include "vmm/machine/machine_config.h"
#include "vmm/machine/run_result.h"

namespace lockvisor::machine {

class Machine {
 public:
  // Validates the configuration and builds the VM; throws lockvisor::Error
  // with a one-line message for bad input.
  Machine(const kvm::KvmSystem& kvm, MachineConfig config, std::span<const std::byte> image,
          std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::now());
  ~Machine();
  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;

  RunResult run();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Throws lockvisor::Error (one line) for a configuration no VM can have;
// needs no KVM, so front ends call it before opening /dev/kvm.
void validate_config(const MachineConfig& config);

// Checks the guest image and that --memory fits it and the vCPU stacks,
// also without KVM. Throws lockvisor::Error ("guest image: ...").
void validate_image(const MachineConfig& config, std::span<const std::byte> image);

// Smallest --memory (MiB) that fits the image and the vCPU stacks.
std::uint64_t minimum_memory_mib(unsigned vcpus, std::uint64_t image_end);

}  // namespace lockvisor::machine
