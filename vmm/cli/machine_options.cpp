#include "vmm/cli/machine_options.h"

#include "lockvisor/abi/guest_layout.h"
#include "vmm/cli/option_checks.h"
#include "vmm/host/cpu_set.h"
#include "vmm/util/error.h"

namespace lockvisor::cli {

void MachineOptions::add_to(CLI::App& command) {
  command.add_option("--vcpus", config.vcpus, "Number of vCPUs, 1..128 (may exceed host CPUs: that is the point)")
      ->transform(unsigned_in(0, std::numeric_limits<unsigned>::max()).description(""));  // 1..128: validate_config
  // Bounded here, before `memory_mib << 20` could wrap to a small size.
  command.add_option("--memory", config.memory_mib, "Guest memory in MiB (an even number, 2..4096)")
      ->transform(unsigned_in(2, abi::kMaxMemoryBytes >> 20));
  command.add_option("--pcpus", pcpus, "Host CPUs the vCPU threads may use, e.g. 0 or 0-1 (default: all allowed)");
  command.add_option("--pin", pin, "spread: vCPU i pinned to the i-th of --pcpus round-robin; float: any of them")
      ->check(CLI::IsMember({"spread", "float"}));
  command.add_option("--backend", backend,
                     "PV backend. userspace: KICK_CPU and halts are doorbell exits to the VMM (every KVM); kvm: "
                     "KVM's in-kernel KICK_CPU (vmcall/vmmcall and hlt at CPL0, in-kernel irqchip; not on PVM)")
      ->check(CLI::IsMember({"userspace", "kvm"}));
  command.add_option("--guest-ring", config.guest_ring,
                     "Ring the guest program runs in: 3 (default) or 0 (hlt/vmcall direct, PLE sees its pause "
                     "loops; not on PVM)")
      ->check(CLI::IsMember({0u, 3u}));
  command.add_option("--ple", ple,
                     "Pause-loop exiting: on (as the KVM module sets it) or off (KVM_CAP_X86_DISABLE_EXITS PAUSE)")
      ->check(CLI::IsMember({"on", "off"}));
  command.add_option("--sbi-kick", sbi_kick,
                     "SBI PVLOCK kick: sticky (remembered until the next halt, like KVM's pv_unhalted) or proposed "
                     "(the RISC-V host patch: lost unless the target is halted)")
      ->check(CLI::IsMember({"sticky", "proposed"}));
  command.add_option("--enforce-pv-cpuid", enforce_pv_cpuid,
                     "With --no-pv: on refuses KICK_CPU (KVM_CAP_ENFORCE_PV_FEATURE_CPUID); off kicks anyway, as "
                     "KVM does without enforcement")
      ->check(CLI::IsMember({"on", "off"}));
  command.add_option("--kick", kick, "sticky: a kick before a halt is remembered; lossy: dropped unless halted")
      ->check(CLI::IsMember({"sticky", "lossy"}));
  command.add_option("--kick-delay-us", config.backend.kick_delay_us, "Delay every kick by N microseconds (at most 1 s)")
      ->transform(unsigned_in(0, 1000000));
  auto* halt_poll_option =
      command.add_option("--halt-poll", halt_poll,
                         "Halt polling: off, fixed:US (poll US us before sleeping) or adaptive[:MAX_US] (KVM's "
                         "grow/shrink window, max 200 us by default); default: " +
                             pvlock::format_halt_poll(pvlock::BackendOptions{}.halt_poll));
  command.add_option("--halt-poll-us", halt_poll_us, "Same as --halt-poll fixed:N (0: off; at most 1 s)")
      ->transform(unsigned_in(0, 1000000))
      ->excludes(halt_poll_option);
  command.add_option("--kick-yield", kick_yield,
                     "on: a kicker that wakes a vCPU which last ran on its host CPU yields that CPU (sched_yield)")
      ->check(CLI::IsMember({"on", "off"}));
  command.add_option("--kick-boost", kick_boost, "on: a kick boosts the vCPU it wakes (see --boost)")
      ->check(CLI::IsMember({"on", "off"}));
  command.add_option("--boost", boost,
                     "How YIELD_TO and --kick-boost boost a vCPU thread for up to 4 ms: fifo (SCHED_FIFO), nice "
                     "(nice -20), off, auto (fifo when permitted, else off); fifo/nice without CAP_SYS_NICE: exit 6")
      ->check(CLI::IsMember({"auto", "fifo", "nice", "off"}));
  command.add_flag("--no-steal-time", no_steal_time, "Hide KVM_FEATURE_STEAL_TIME: the guest keeps no steal-time record");
  command.add_flag("--no-pv", no_pv, "Hide KVM_FEATURE_PV_UNHALT; KICK_CPU returns -1000");
  command.add_flag("--no-sbi-pvlock", no_sbi, "Turn the SBI PVLOCK extension off");
  command.add_option("--sbi-eid", sbi_eid, "Experimental-range alias of the SBI PVLOCK EID (hex)");
  command.add_option("--runstate", runstate,
                     "vCPU run-state page (sched_switch BPF, read-only in the guest): auto: when it loads, else "
                     "'unknown'; on: fail (exit 6) if it cannot load; off: always 'unknown'")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  command.add_flag("--dedicated", config.dedicated_hint, "Advertise KVM_HINTS_REALTIME (vCPUs are dedicated)");
  command.add_option("--timeout", config.timeout_s,
                     "Watchdog: stop the guest after S seconds (exit code 4), 0.001..1e6; 0: none (lock workloads: "
                     "10 x --duration + 60 s)")
      ->check(seconds_in(0.001, 1e6, true));
  command.add_option("--serial", config.serial_path, "Write the guest's COM1 output to FILE instead of stdout");
  command.add_option("--image", image, "Guest ELF image (default: the one built into lockvisor)");
  command.add_option("--seed", config.seed, "Seed of the guest's pseudo-random choices")->transform(unsigned_in(0, kU64Max));
  add_limit_options(command, config.limits);
}

void MachineOptions::finish() {
  if (!pcpus.empty()) config.pcpus = host::parse_cpu_list(pcpus);
  config.pin = pin == "float" ? machine::PinPolicy::kFloat : machine::PinPolicy::kSpread;
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
  config.ple = ple == "off" ? machine::PleMode::kOff : machine::PleMode::kOn;
  config.sbi_kick_proposed = sbi_kick == "proposed";
  config.backend.enforce_pv_feature_cpuid = enforce_pv_cpuid == "on";
  config.sbi_pvlock = !no_sbi;
  if (!sbi_eid.empty()) {
    std::size_t used = 0;
    unsigned long value = 0;
    try {
      value = std::stoul(sbi_eid, &used, 16);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != sbi_eid.size() || value > 0xFFFFFFFFul) fail("--sbi-eid '{}': not a hexadecimal EID", sbi_eid);
    config.sbi_experimental_eid = static_cast<std::uint32_t>(value);
  }
}

}  // namespace lockvisor::cli
