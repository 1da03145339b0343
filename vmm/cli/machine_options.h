// Options shared by the commands that boot a VM: they fill a MachineConfig.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "vmm/cli/limit_options.h"
#include "vmm/machine/machine_config.h"

namespace lockvisor::cli {

struct MachineOptions {
  machine::MachineConfig config;
  std::string pcpus;  // parsed after CLI11 is done
  std::string pin = "spread";
  std::string kick = "sticky";
  std::string image;
  std::string sbi_eid;
  std::string runstate = "auto";
  std::string backend = "userspace";
  std::string ple = "on";
  std::string sbi_kick = "sticky";
  std::string enforce_pv_cpuid = "on";
  bool no_pv = false;
  bool no_sbi = false;
  // Host knobs of the userspace backend (converted in finish()).
  std::string halt_poll;             // --halt-poll off|fixed:US|adaptive[:MAX_US]; empty: the default
  std::uint32_t halt_poll_us = 0;    // --halt-poll-us N: the older spelling of fixed:N
  std::string kick_yield = "off";
  std::string kick_boost = "off";
  std::string boost = "auto";
  bool no_steal_time = false;

  void add_to(CLI::App& command);
  // Converts the string options; throws lockvisor::Error.
  void finish();
};

}  // namespace lockvisor::cli
