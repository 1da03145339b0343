// Options shared by the commands that boot a VM: they fill a MachineConfig.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "vmm/cli/limit_options.h"
#include "vmm/machine/machine_config.h"

namespace lockvisor::cli {

struct MachineOptions {
  machine::MachineConfig config;
  // The options given as text, converted in finish(); their defaults are
  // the rows' of vmm/experiment/run_settings.cpp (set when registered).
  std::string vcpus;  // a count or a ratio of the host CPUs (2x); empty: config.vcpus as it is
  std::string pcpus;  // host CPUs in words (vmm/host/host_cpus.h); not given: all allowed CPUs
  std::string pin;
  std::string vnuma;  // empty: no virtual NUMA topology
  std::string kick;
  std::string image;
  std::string sbi_eid;
  std::string runstate;
  std::string backend;
  std::string ple;
  std::string pv_wake;
  std::string sbi_kick;
  std::string enforce_pv_cpuid;
  bool no_pv = false;
  bool no_sbi = false;
  // Host knobs of the userspace backend.
  std::string halt_poll;             // --halt-poll off|fixed:US|adaptive[:MAX_US]; empty: the default
  std::uint32_t halt_poll_us = 0;    // --halt-poll-us N: the older spelling of fixed:N
  std::string kick_yield;
  std::string kick_boost;
  std::string boost;
  bool no_steal_time = false;

  CLI::Option* pcpus_option = nullptr;  // given-ness: `--pcpus ""` is refused, not the default

  void add_to(CLI::App& command);
  // Converts the string options; throws lockvisor::Error.
  void finish();
};

}  // namespace lockvisor::cli
