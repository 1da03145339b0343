#include "vmm/report/settings_json.h"

#include "vmm/host/kvm_module_params.h"
#include "vmm/pvlock/halt_poll.h"
#include "vmm/pvlock/vcpu_boost.h"

namespace lockvisor::report {

nlohmann::json settings_json(const machine::MachineConfig& config,
                             const std::vector<machine::KickModeChange>& kick_mode_changes) {
  const bool kvm_backend = config.backend_kind == pvlock::BackendKind::kKvm;
  const auto pause = host::read_pause_exit_params();
  nlohmann::json ple = {{"mode", config.ple == machine::PleMode::kOff ? "off" : "on"}, {"module", pause.module}};
  for (const auto& [name, value] : pause.values) ple[name] = value;
  const auto halt_poll_ns = host::read_halt_poll_ns();
  nlohmann::json halt_poll;
  const pvlock::BackendOptions& b = config.backend;
  if (kvm_backend)  // KVM's adaptive polling, bounded by KVM_CAP_HALT_POLL or the module parameter
    halt_poll = {{"by", "kvm"},
                 {"setting", pvlock::format_halt_poll(b.halt_poll)},
                 {"module_halt_poll_ns", halt_poll_ns ? nlohmann::json(*halt_poll_ns) : nullptr}};
  else
    halt_poll = {{"by", "vmm"}, {"setting", pvlock::format_halt_poll(b.halt_poll)}};
  nlohmann::json settings = {{"backend", pvlock::backend_kind_name(config.backend_kind)},
                             {"guest_ring", config.guest_ring},
                             {"pv_wake", abi::pv_wake_name(config.pv_wake)},
                             {"ple", ple},
                             {"kick", pvlock::kick_mode_name(config.backend.mode)},
                             {"sbi_kick", config.sbi_kick_proposed ? "proposed" : "sticky"},
                             {"pv_unhalt", config.pv_unhalt},
                             {"enforce_pv_cpuid", config.backend.enforce_pv_feature_cpuid},
                             {"halt_poll", halt_poll},
                             {"kick_delay_us", b.kick_delay_us},
                             {"kick_yield", b.kick_yield},
                             {"kick_boost", b.kick_boost},
                             {"boost", pvlock::boost_mechanism_name(b.boost)},
                             {"boost_bound_us", b.boost_bound_us},
                             {"steal_time", config.steal_time},
                             // --inject schedules (docs/preemption.md) and the seed they draw from
                             // unless a schedule names its own.
                             {"inject", config.inject},
                             {"inject_seed", config.seed},
                             // --vnuma as its explicit form (null: none), and whether any
                             // remote cost in the results is modelled: a virtual node is a
                             // label and a pinning, so a remote handoff costs nothing
                             // unless --vnuma-remote-ns adds a busy-wait for it.
                             {"vnuma", config.vnuma ? nlohmann::json(machine::format_vnuma(*config.vnuma)) : nullptr},
                             // "shared": every node on the same host CPUs, a labelling
                             // of vCPUs without host locality (vnuma.h).
                             {"vnuma_host_cpus", !config.vnuma              ? nlohmann::json(nullptr)
                                                 : config.vnuma->shares_cpus() ? nlohmann::json("shared")
                                                                               : nlohmann::json("per-node")},
                             {"vnuma_remote_ns", config.vnuma_remote_ns},
                             {"vnuma_remote_cost", config.vnuma_remote_ns != 0 ? "modelled" : "none"}};
  if (!kick_mode_changes.empty()) {
    auto& changes = settings["kick_mode_changes"] = nlohmann::json::array();
    for (const auto& c : kick_mode_changes) changes.push_back({{"at_s", c.at_seconds}, {"from", c.from}, {"to", c.to}});
  }
  return settings;
}

}  // namespace lockvisor::report
