// The state one run shares between its vCPU threads and its monitor thread:
// how the run ends (the first end() decides the outcome; every later call is
// ignored), the guest's VM-wide budget, the serial console, the APIC-ID map,
// the first-entry/first-exit times and the guest's print lines.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lockvisor/abi/guest_layout.h"
#include "vmm/machine/guest_limits.h"
#include "vmm/machine/machine_config.h"
#include "vmm/machine/run_result.h"
#include "vmm/machine/serial_console.h"
#include "vmm/pvlock/pv_backend.h"
#include "vmm/runstate/runstate_loader.h"
#include "vmm/runstate/runstate_page.h"

namespace lockvisor::machine {

class RunControl {
 public:
  RunControl(const MachineConfig& config, pvlock::PvBackend& backend, SerialConsole& serial,
             std::chrono::steady_clock::time_point origin);

  const MachineConfig& config() const { return config_; }
  pvlock::PvBackend& backend() { return backend_; }
  SerialConsole& serial() { return serial_; }
  // The VM-wide counters config().limits apply to.
  GuestBudget& budget() { return budget_; }
  GuestUsage usage() const;
  bool stopping() const { return stopping_.load(); }

  // Ends the run with `outcome` unless an earlier call already decided it.
  void end(Outcome outcome, std::string reason, std::vector<std::string> details = {});
  Outcome outcome() const;
  std::string reason() const;
  std::vector<std::string> details() const;
  bool decided() const;
  // A Linux guest resets the machine (reboot=t, a panic) by a triple
  // fault: for it, KVM_EXIT_SHUTDOWN ends the run like a reset. For the
  // freestanding guest it is a fault. Set before any vCPU runs.
  // Such a run ends completed with kShutdownResetReason.
  static constexpr std::string_view kShutdownResetReason = "the guest reset the machine (triple fault)";
  void set_shutdown_is_reset(bool yes) { shutdown_is_reset_ = yes; }
  bool shutdown_is_reset() const { return shutdown_is_reset_; }
  // A guest that asked for the end of the run (a power-off) reports its
  // exit status here; the run's exit code follows it.
  void set_guest_status(std::uint64_t status);
  std::optional<std::uint64_t> guest_status() const;

  // Registered by the Machine: takes every vCPU out of KVM_RUN and its halts.
  void set_stop_hook(std::function<void()> hook) { stop_hook_ = std::move(hook); }

  void note_entry();
  void note_exit();
  double seconds_to_first_entry() const { return first_entry_s_.load(); }
  double seconds_to_first_exit() const { return first_exit_s_.load(); }

  // APIC ID -> vCPU index (-1: no such vCPU). Filled before any vCPU runs.
  int apic_to_index(std::uint64_t apic_id) const;
  void map_apic(unsigned apic_id, unsigned index);

  void add_print(std::string line);
  std::vector<std::string> prints() const;

  // The vCPU run-state page's loader (runstate_loader.h) and where the
  // guest sees the page. Set once by the Machine before any vCPU starts.
  void set_runstate(runstate::RunStateLoader* loader, std::uint64_t gpa, std::uint64_t bytes) {
    runstate_loader_ = loader;
    runstate_gpa_ = gpa;
    runstate_bytes_ = bytes;
  }
  runstate::RunStateLoader* runstate_loader() const { return runstate_loader_; }
  // The live page, nullptr while it is not (yet) published.
  runstate::RunStatePage* runstate_page() const { return runstate_loader_ ? runstate_loader_->page() : nullptr; }
  bool in_runstate_page(std::uint64_t gpa) const { return gpa >= runstate_gpa_ && gpa - runstate_gpa_ < runstate_bytes_; }

 private:
  const MachineConfig& config_;
  pvlock::PvBackend& backend_;
  SerialConsole& serial_;
  GuestBudget budget_;
  std::chrono::steady_clock::time_point origin_;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mutex_;
  bool decided_ = false;
  Outcome outcome_ = Outcome::kCompleted;
  std::string reason_;
  std::vector<std::string> details_;
  std::optional<std::uint64_t> guest_status_;
  bool shutdown_is_reset_ = false;
  std::vector<std::string> prints_;
  std::function<void()> stop_hook_;
  std::atomic<double> first_entry_s_{0};
  std::atomic<double> first_exit_s_{0};
  std::vector<int> apic_map_ = std::vector<int>(lockvisor::abi::kMaxVcpus, -1);  // APIC id -> vCPU index
  runstate::RunStateLoader* runstate_loader_ = nullptr;
  std::uint64_t runstate_gpa_ = 0;
  std::uint64_t runstate_bytes_ = 0;
};

}  // namespace lockvisor::machine
