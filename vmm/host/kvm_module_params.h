// The KVM module parameters that decide how a spinning or halting vCPU is
// treated, read from sysfs (/sys/module/<module>/parameters):
//   - pause-loop exiting: kvm_intel's ple_gap/ple_window, kvm_amd's
//     pause_filter_count/pause_filter_thresh; neither module on PVM (or
//     without KVM): no pause exits at all, "none";
//   - kvm's halt_poll_ns (the in-kernel halt polling the kvm backend uses).
// Read for doctor and for every JSON result's settings; never fails: what
// cannot be read is absent.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

namespace lockvisor::host {

inline constexpr const char* kSysModule = "/sys/module";

struct PauseExitParams {
  std::string module = "none";                  // "kvm_intel", "kvm_amd" or "none"
  std::map<std::string, std::int64_t> values;   // parameter name -> value (those that could be read)
};

PauseExitParams read_pause_exit_params(const std::filesystem::path& sys_module = kSysModule);

// kvm's halt_poll_ns, nullopt when unreadable (no kvm module, e.g. PVM's kvm_pvm still has it).
std::optional<std::int64_t> read_halt_poll_ns(const std::filesystem::path& sys_module = kSysModule);

}  // namespace lockvisor::host
