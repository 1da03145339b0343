// One VM run from start to report: builds the VM from a MachineConfig, runs
// one host thread per vCPU, and watches them from the calling thread with a
// Boost.Asio event loop (the --timeout watchdog, the deadlock detector, and
// SIGINT/SIGTERM/SIGHUP as StopSignals hands them over). machine.cpp builds
// the VM, machine_run.cpp runs it; the exit loop itself lives in
// vcpu_runner.cpp.
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
#include "vmm/kvm/vcpu.h"
#include "vmm/machine/linux_guest.h"
#include "vmm/machine/machine_config.h"
#include "vmm/machine/run_result.h"
#include "vmm/machine/run_service.h"
#include "vmm/machine/stop_signals.h"

namespace lockvisor::machine {

class Machine {
 public:
  // Validates the configuration and builds the VM; throws lockvisor::Error
  // with a one-line message for bad input, and Interrupted (below) when a
  // stop signal has already arrived: no VM is built after SIGINT/SIGTERM.
  Machine(const kvm::KvmSystem& kvm, MachineConfig config, std::span<const std::byte> image,
          std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::now());
  // The same for an unmodified Linux kernel (linux_guest.h): refused on PVM
  // before anything is built (one line, exit code 2).
  Machine(const kvm::KvmSystem& kvm, MachineConfig config, LinuxGuest guest,
          std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::now());
  ~Machine();
  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;

  // Runs the VM to its end. Every way of ending (all vCPUs done, guest fault,
  // --timeout, deadlock, SIGINT/SIGTERM/SIGHUP via StopScope) returns here
  // promptly: see "Every wait ends when the run stops" in machine_run.cpp.
  RunResult run();

  // Something that works alongside the running VM (run_service.h): the
  // preemption injector, the control socket, the timeline
  // (trace::TraceService). Its before_boot() runs here; add before run().
  void add_service(std::unique_ptr<RunService> service);

 private:
  struct State;
  // One call of run(): its event loop and its steps (machine_run.cpp).
  class Run;
  void build_common(const kvm::KvmSystem& kvm, MachineConfig config, std::chrono::steady_clock::time_point origin,
                    bool linux_guest);
  void build_freestanding(const kvm::KvmSystem& kvm, std::span<const std::byte> image);
  void build_linux(const kvm::KvmSystem& kvm, LinuxGuest guest);
  void finish_build();
  static std::uint64_t tsc_khz_of(const kvm::Vcpu& vcpu);
  void map_runstate_page(const kvm::KvmSystem& kvm);
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

// The part of validate_host() that needs no open KVM: what a PVM /dev/kvm
// cannot run (--backend kvm, --guest-ring 0), for checks that judge a command
// line on this host without building anything (the lab's, before its first point).
void refuse_what_pvm_cannot_run(const MachineConfig& config);

// Linux guests need hardware KVM (or the nested machine): on PVM, one line
// (usage kind: exit 2) that says why; elsewhere the in-kernel irqchip and PIT.
void validate_linux_host(const kvm::KvmSystem& kvm);
// The PVM half of it, needing no /dev/kvm: front ends call it first. The
// message starts with `option`, the one that asked for a Linux guest.
void refuse_linux_on_pvm(const char* option = "--kernel");

// Checks the guest image and that --memory fits it and the vCPU stacks,
// also without KVM. Throws lockvisor::Error ("guest image: ...").
void validate_image(const MachineConfig& config, std::span<const std::byte> image);

// The most descriptors a VM of `vcpus` vCPUs opens (the VM raises its soft
// open-file limit for them: vmm/host/open_files.h).
std::uint64_t files_for_vcpus(unsigned vcpus);

// Smallest --memory (MiB) that fits the image and the vCPU stacks.
std::uint64_t minimum_memory_mib(unsigned vcpus, std::uint64_t image_end);
// The same for an image not yet loaded; throws as validate_image does.
std::uint64_t minimum_memory_mib(unsigned vcpus, std::span<const std::byte> image);

}  // namespace lockvisor::machine
