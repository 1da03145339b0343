#include "vmm/cli/machine_options.h"

#include "lockvisor/abi/guest_layout.h"
#include "vmm/cli/option_checks.h"
#include "vmm/cli/setting_options.h"
#include "vmm/host/cpu_set.h"
#include "vmm/host/host_cpus.h"
#include "vmm/util/error.h"
#include "vmm/util/hex_number.h"

namespace lockvisor::cli {

void MachineOptions::add_to(CLI::App& command) {
  // The row's range is validate_config's, which every caller of the machine
  // runs: here only what CLI11 needs to convert the text, so that --vcpus 0
  // gets the same message from run, the lab and the tests; --help shows the
  // row's range all the same.
  // A count, or a ratio of the host CPUs (2x) that finish() resolves once
  // --pcpus is known: the ratio passes as text, a count through unsigned_in.
  const CLI::Validator count = unsigned_in(0, std::numeric_limits<unsigned>::max());
  command.add_option("--vcpus", vcpus, setting_row("vcpus").help)
      ->transform(CLI::Validator(
                      [count](std::string& text) -> std::string {
                        if (host::is_vcpu_ratio(text)) return {};
                        std::string error = count(text);
                        if (!error.empty() && error.front() == '\'')
                          return fmt::format("'{}' is neither a count nor a ratio of the host CPUs (2x)", text);
                        return error;
                      },
                      experiment::range_text(setting_row("vcpus")) + ", or a ratio of --pcpus (2x)"))
      ->type_name("COUNT")
      ->default_str(setting_row("vcpus").def);
  // Bounded on the text, before `memory_mib << 20` could wrap to a small size.
  add_setting(command, "memory_mib", config.memory_mib);
  pcpus_option = add_setting(command, "pcpus", pcpus);
  add_setting(command, "pin", pin);
  add_setting(command, "vnuma", vnuma);
  add_setting(command, "vnuma_remote_ns", config.vnuma_remote_ns);
  add_setting(command, "backend", backend);
  add_setting(command, "guest_ring", config.guest_ring);
  add_setting(command, "pv_wake", pv_wake);
  add_setting(command, "ple", ple);
  add_setting(command, "sbi_kick", sbi_kick);
  add_setting(command, "enforce_pv_cpuid", enforce_pv_cpuid);
  add_setting(command, "kick", kick);
  add_setting(command, "kick_delay_us", config.backend.kick_delay_us);
  auto* halt_poll_option = add_setting(command, "halt_poll", halt_poll,
                                       "; default: " + pvlock::format_halt_poll(pvlock::BackendOptions{}.halt_poll));
  add_setting(command, "halt_poll_us", halt_poll_us)->excludes(halt_poll_option);
  add_setting(command, "kick_yield", kick_yield);
  add_setting(command, "kick_boost", kick_boost);
  add_setting(command, "boost", boost);
  add_setting(command, "no_steal_time", no_steal_time);
  add_setting(command, "no_pv", no_pv);
  add_setting(command, "no_sbi_pvlock", no_sbi);
  add_setting(command, "sbi_eid", sbi_eid);
  add_setting(command, "runstate", runstate);
  add_setting(command, "dedicated", config.dedicated_hint);
  add_setting(command, "timeout_s", config.timeout_s);
  add_setting(command, "serial", config.serial_path);
  add_setting(command, "image", image);
  add_setting(command, "seed", config.seed);
  add_limit_options(command, config.limits);
}

void MachineOptions::finish() {
  if (pcpus_option != nullptr && pcpus_option->count() > 0) config.pcpus = host::resolve_pcpus_option(pcpus);
  if (!vcpus.empty()) {
    const bool ratio = host::is_vcpu_ratio(vcpus);
    const std::size_t host_cpus = !ratio ? 0 : config.pcpus.empty() ? host::usable_cpus().size() : config.pcpus.size();
    try {
      config.vcpus = host::resolve_vcpus(vcpus, host_cpus);
    } catch (const Error& e) {
      fail("--vcpus: {}", e.what());
    }
    // validate_config() judges the count; a ratio's message also says what it resolved to.
    if (ratio && config.vcpus > abi::kMaxVcpus)
      fail("--vcpus {}: {} vCPUs on {} host CPUs, must be between 1 and {}", vcpus, config.vcpus, host_cpus,
           abi::kMaxVcpus);
  }
  config.pin = pin == "float" ? machine::PinPolicy::kFloat : machine::PinPolicy::kSpread;
  if (!vnuma.empty()) {
    const bool pcpus_given = !config.pcpus.empty();
    config.vnuma = machine::parse_vnuma(vnuma, config.vcpus, pcpus_given ? config.pcpus : host::allowed_cpus(),
                                        pcpus_given);
  }
  if (config.vnuma_remote_ns != 0 && !config.vnuma)
    fail("--vnuma-remote-ns {}: needs --vnuma (a remote handoff needs two nodes)", config.vnuma_remote_ns);
  config.backend.mode = kick == "lossy" ? pvlock::KickMode::kLossy : pvlock::KickMode::kSticky;
  config.runstate = runstate == "on"    ? machine::RunStateMode::kOn
                    : runstate == "off" ? machine::RunStateMode::kOff
                                        : machine::RunStateMode::kAuto;
  if (!halt_poll.empty())
    config.backend.halt_poll = pvlock::parse_halt_poll(halt_poll);
  else if (halt_poll_us != 0)
    config.backend.halt_poll = pvlock::HaltPollSetting::fixed(halt_poll_us);
  config.backend.kick_yield = kick_yield == "on";
  config.backend.kick_boost = kick_boost == "on";
  // Resolved here so that the report says what was used (auto -> fifo or off).
  // --kick-boost needs a real mechanism: auto then means fifo, and a missing
  // privilege is a host problem (exit 6).
  pvlock::BoostMechanism requested = pvlock::parse_boost_mechanism(boost);
  if (config.backend.kick_boost && requested == pvlock::BoostMechanism::kAuto) requested = pvlock::BoostMechanism::kFifo;
  if (config.backend.kick_boost && requested == pvlock::BoostMechanism::kOff)
    fail("--kick-boost on needs a boost mechanism, not --boost off");
  config.backend.boost = pvlock::resolve_boost_mechanism(requested);
  config.steal_time = !no_steal_time;
  config.pv_unhalt = !no_pv;
  config.backend_kind = backend == "kvm" ? pvlock::BackendKind::kKvm : pvlock::BackendKind::kUserspace;
  for (const abi::PvWake w : abi::kPvWakes)
    if (pv_wake == abi::pv_wake_name(w)) config.pv_wake = w;
  config.ple = ple == "off" ? machine::PleMode::kOff : machine::PleMode::kOn;
  config.sbi_kick_proposed = sbi_kick == "proposed";
  config.backend.enforce_pv_feature_cpuid = enforce_pv_cpuid == "on";
  config.sbi_pvlock = !no_sbi;
  if (!sbi_eid.empty()) {
    const auto value = parse_hex_u32(sbi_eid);
    if (!value) fail("--sbi-eid '{}': not a hexadecimal EID", sbi_eid);
    config.sbi_experimental_eid = *value;
  }
}

}  // namespace lockvisor::cli
