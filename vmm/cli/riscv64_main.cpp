// The `lockvisor` command built for riscv64 (the riscv64 preset): the RV64
// freestanding guest under RISC-V KVM (vmm/arch/riscv64), with the
// subcommands that port: run, doctor, locks. What needs x86 (Linux guests,
// the run-state page, --backend kvm's x86 path, --pv-wake, the lab) is
// refused with one line and exit code 2 before anything runs.
#include <fcntl.h>
#include <sys/ioctl.h>
#include <linux/kvm.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <span>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "guest/locks/lock_events.h"
#include "guest/locks/registry.h"
#include "lockvisor/abi/boot_info.h"
#include "lockvisor/abi/sbi_lockvisor.h"
#include "lockvisor/abi/sbi_pvlock.h"
#include "lockvisor/abi/workload.h"
#include "vmm/arch/arch_name.h"
#include "vmm/arch/riscv64/rv_conformance.h"
#include "vmm/arch/riscv64/rv_machine.h"
#include "vmm/experiment/lock_name.h"
#include "vmm/experiment/workload_settings.h"
#include "vmm/guest_image.h"
#include "vmm/host/cpu_set.h"
#include "vmm/host/host_cpus.h"
#include "vmm/machine/run_result.h"
#include "vmm/util/build_version.h"
#include "vmm/util/error.h"
#include "vmm/util/hex_number.h"
#include "vmm/util/unique_fd.h"

namespace {

using namespace lockvisor;
using arch::riscv64::KickMode;

constexpr int kUsage = 2;

// The options of x86's `run` that have no RISC-V meaning yet, and why.
struct X86Only {
  const char* flag;
  const char* why;
};
constexpr X86Only kX86Only[] = {
    {"--kernel", "Linux guests run on x86-64 only"},
    {"--initrd", "Linux guests run on x86-64 only"},
    {"--runstate", "the run-state page is an eBPF program, and Debian 12 has no riscv64 libbpf"},
    {"--backend", "--backend kvm is x86's in-kernel KICK_CPU; RISC-V has one backend"},
    {"--pv-wake", "--pv-wake chooses among x86 wake paths"},
};

// The guest's own counts from a hart's WorkloadStats: its halts (pv_halts:
// the WFIs its wait() executed; pv_wait counts the calls, some of which find
// the condition gone and do not halt) and kicks (pv_kick), to set beside
// KVM's WFI count and the VMM's kick count. nullopt: not a workload run.
struct GuestCounts {
  std::uint64_t ops, violations, pv_wait, pv_halts, pv_kick;
};
std::optional<GuestCounts> guest_counts(const arch::riscv64::RvHartReport& h) {
  for (const auto& v : h.results) {
    if (v.key != "workload_stats" || v.values.size() * sizeof(std::uint64_t) < sizeof(abi::WorkloadStats)) continue;
    abi::WorkloadStats stats;
    std::memcpy(&stats, v.values.data(), sizeof stats);
    return GuestCounts{stats.ops, stats.violations,
                       stats.lock_events[static_cast<unsigned>(locks::LockEvent::pv_wait)], stats.pv_halts,
                       stats.lock_events[static_cast<unsigned>(locks::LockEvent::pv_kick)]};
  }
  return std::nullopt;
}

nlohmann::json run_json(const arch::riscv64::RvRunResult& r, const arch::riscv64::RvMachineConfig& c,
                        const std::string& kick) {
  nlohmann::json vcpus = nlohmann::json::array();
  for (const auto& h : r.harts) {
    nlohmann::json results = nlohmann::json::object();
    for (const auto& v : h.results) results[v.key] = v.values.size() == 1 ? nlohmann::json(v.values[0]) : nlohmann::json(v.values);
    nlohmann::json cases = nlohmann::json::array();
    for (const auto& c : h.cases) cases.push_back({{"name", c.name}, {"passed", c.passed}, {"ended", c.ended}});
    nlohmann::json guest = nullptr;
    if (const auto g = guest_counts(h))
      guest = {{"ops", g->ops},
               {"violations", g->violations},
               {"pv_wait", g->pv_wait},
               {"pv_halts", g->pv_halts},
               {"pv_kick", g->pv_kick}};
    vcpus.push_back({{"affinity", host::format_cpu_list(h.affinity)},
                     {"done", h.done},
                     {"guest", guest},
                     {"exit_code", h.exit_code},
                     {"results", results},
                     {"cases", cases},
                     {"pv",
                      {{"kicks_sent", h.pv.kicks_sent},
                       {"kicks_received", h.pv.kicks_received},
                       {"kicks_coalesced", h.pv.kicks_coalesced},
                       {"kicks_dropped", h.pv.kicks_dropped},
                       {"kicks_invalid", h.pv.kicks_invalid},
                       {"acks", h.acks},
                       {"halts", h.wfi_exits}}},
                     {"sbi_exits", h.sbi_exits}});
  }
  return {{"arch", arch::kRiscv64},
          {"outcome", machine::outcome_name(r.outcome)},
          {"exit_code", machine::exit_code(r.outcome)},
          {"reason", r.reason},
          {"wall_seconds", r.wall_seconds},
          {"host", {{"kvm", "riscv"}, {"timebase_hz", r.timebase_hz}, {"lockvisor_version", util::build_version()}}},
          {"settings",
           {{"vcpus", c.boot.harts},
            {"pcpus", host::format_cpu_list(c.pcpus)},
            {"program", c.boot.program},
            {"sbi_kick", kick},
            {"sbi_pvlock", (c.boot.flags & abi::kBootFlagSbiPvlock) != 0},
            {"sbi_eid", fmt::format("{:#x}", c.boot.sbi_experimental_eid)}}},
          {"unknown_hypercalls", {{"sbi", r.unknown_sbi_calls}}},
          {"vcpus", vcpus},
          {"guest_prints", r.console}};
}

int run_command(const arch::riscv64::RvMachineConfig& config, const std::string& kick, const std::string& json_path) {
  const auto result = arch::riscv64::run_rv_machine(config);
  fmt::print("{}: {} (exit {}){}{}\n", arch::kRiscv64, machine::outcome_name(result.outcome),
             machine::exit_code(result.outcome), result.reason.empty() ? "" : ": ", result.reason);
  for (unsigned i = 0; i < result.harts.size(); ++i) {
    const auto& h = result.harts[i];
    fmt::print("hart {}: host CPUs {}{}\n", i, host::format_cpu_list(h.affinity),
               config.pcpus.empty() ? " (not pinned)" : "");
    // A workload's counts with the guest's beside the VMM's and KVM's.
    if (const auto g = guest_counts(h))
      fmt::print("hart {}: {} acquisitions, {} violations; halts (WFI) {} (guest {}), kicks sent {} (guest {})\n", i,
                 g->ops, g->violations, h.wfi_exits, g->pv_halts, h.pv.kicks_sent, g->pv_kick);
    fmt::print("hart {}: kicks received {} coalesced {} dropped {} invalid {}, waits a kick ended {}\n", i,
               h.pv.kicks_received, h.pv.kicks_coalesced, h.pv.kicks_dropped, h.pv.kicks_invalid, h.acks);
    // Scalars in the text, arrays (a workload's statistics) only in --json.
    for (const auto& v : h.results)
      if (v.values.size() == 1) fmt::print("hart {}: {} = {}\n", i, v.key, static_cast<std::int64_t>(v.values[0]));
  }
  if (json_path.empty() && !result.harts.empty()) fmt::print("(each hart's workload statistics: --json FILE)\n");
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << run_json(result, config, kick).dump(2) << "\n";
    if (!out) fail("--json {}: cannot write", json_path);
  }
  return machine::exit_code(result.outcome);
}

int doctor_command(std::span<const std::byte> image) {
  fmt::print("lockvisor doctor ({})\n", arch::kRiscv64);
  UniqueFd kvm(::open("/dev/kvm", O_RDWR | O_CLOEXEC));
  if (!kvm.valid()) {
    fmt::print("/dev/kvm: cannot open ({}): nothing can run here\n", std::strerror(errno));
    return 1;
  }
  const int api = ::ioctl(kvm.get(), KVM_GET_API_VERSION, 0);
  const int max_vcpus = ::ioctl(kvm.get(), KVM_CHECK_EXTENSION, KVM_CAP_MAX_VCPUS);
  fmt::print("/dev/kvm: open, KVM API {} (want {})\n", api, KVM_API_VERSION);
  fmt::print("max vCPUs: {} (the guest runs at most {})\n", max_vcpus, abi::kRiscvMaxHarts);
  fmt::print("SBI: lockvisor's calls use the experimental range {:#x}-{:#x} (its extension {:#x}); EIDs {:#x} "
             "and {:#x} are answered by stock RISC-V KVM itself (not supported)\n",
             abi::kSbiExperimentalFirst, abi::kSbiExperimentalLast, abi::kSbiExtLockvisor, abi::kSbiExtPvlock,
             abi::kSbiExtPvlockLegacy);
  if (api != KVM_API_VERSION || max_vcpus < 1) return 1;
  // Whether this kernel forwards the experimental range: the embedded guest
  // probes the PVLOCK alias (BASE probe_extension, answered by the VMM only
  // if forwarded) and kicks across 2 harts.
  arch::riscv64::RvMachineConfig config;
  config.boot.harts = 2;
  config.boot.program = "rv-sbi-pvlock";
  config.boot.flags = abi::kBootFlagSbiPvlock;
  config.boot.sbi_experimental_eid = abi::kSbiExtPvlockExperimentalDefault;
  config.timeout_seconds = 60;
  config.image = image;
  const auto r = arch::riscv64::run_rv_machine(config);
  bool forwarded = false;
  for (const auto& v : r.harts.empty() ? std::vector<machine::ResultValue>{} : r.harts[0].results)
    forwarded = forwarded || (v.key == "probe_alias" && v.values.size() == 1 && v.values[0] == 1);
  fmt::print("SBI alias {:#x}: {} (a 2-hart guest run: {}{}{})\n", abi::kSbiExtPvlockExperimentalDefault,
             forwarded ? "forwarded to the VMM, SBI PVLOCK runs here" : "NOT seen by the VMM",
             machine::outcome_name(r.outcome), r.reason.empty() ? "" : ", ", r.reason);
  return forwarded ? 0 : 1;
}

int conformance_command(const std::string& image_path, const std::string& json_path) {
  std::vector<std::byte> storage;
  const auto cases = arch::riscv64::run_rv_conformance(select_guest_image(image_path, storage));
  unsigned failed = 0;
  for (const auto& c : cases) {
    fmt::print("{:<32} {} ({:.1f} s){}{}\n", c.name, c.passed ? "PASS" : "FAIL", c.seconds, c.passed ? "" : ": ",
               c.reason);
    failed += c.passed ? 0 : 1;
  }
  fmt::print("{}: {} passed, {} failed\n", arch::kRiscv64, cases.size() - failed, failed);
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << arch::riscv64::rv_conformance_json(cases).dump(2) << "\n";
    if (!out) fail("--json {}: cannot write", json_path);
  }
  return failed == 0 ? 0 : 1;
}

int locks_command() {
  for (const auto& lock : locks::kLocks) fmt::print("{:<16} {}\n", lock.name, lock.description);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"lockvisor for riscv64: the RV64 guest and its PV locks under RISC-V KVM (docs/riscv.md)"};
  app.set_version_flag("--version", util::build_version());
  app.require_subcommand(1);

  CLI::App* run = app.add_subcommand("run", "boot the RV64 guest and run a program or a lock workload");
  std::string program, workload, lock = "auto", kick = "sticky", sbi_eid, json, image;
  unsigned vcpus = 1;
  double duration = 1, timeout = 0;
  std::uint64_t memory_mib = 256, seed = 1;
  bool no_sbi_pvlock = false;
  run->add_option("--program", program, "guest program (BootInfo::program)");
  run->add_option("--workload", workload, "lock workload: lockbench, uncontended, torture");
  run->add_option("--lock", lock, "lock from the registry (`lockvisor locks`)");
  run->add_option("--vcpus", vcpus, "harts")->check(CLI::Range(1u, abi::kRiscvMaxHarts));
  std::string pcpus;
  CLI::Option* pcpus_option = run->add_option(
      "--pcpus", pcpus,
      fmt::format("host CPUs for the harts: {}; hart i pinned to the i-th, round-robin (default: not pinned)",
                  host::kHostCpuForms));
  run->add_option("--duration", duration, "seconds the workload runs");
  run->add_option("--timeout", timeout, "end the run after this many seconds (exit 4)");
  run->add_option("--memory", memory_mib, "guest RAM, MiB")->check(CLI::Range(8, 65536));
  run->add_option("--seed", seed, "the guest's pseudo-random seed");
  run->add_option("--sbi-eid", sbi_eid, "experimental-range EID of the SBI PVLOCK alias (hex)");
  run->add_option("--sbi-kick", kick, "sticky | proposed")->check(CLI::IsMember({"sticky", "proposed"}));
  run->add_flag("--no-sbi-pvlock", no_sbi_pvlock, "SBI PVLOCK absent: probes 0, kicks not supported");
  run->add_option("--json", json, "write the run's report as JSON to this file");
  run->add_option("--image", image, "guest ELF instead of the embedded one");
  std::vector<std::string> refused(std::size(kX86Only));
  for (std::size_t i = 0; i < std::size(kX86Only); ++i) run->add_option(kX86Only[i].flag, refused[i])->expected(0, 1)->group("");

  CLI::App* conformance = app.add_subcommand("conformance", "the SBI PVLOCK conformance cases on RISC-V KVM");
  std::string conformance_json, conformance_image;
  conformance->add_option("--json", conformance_json, "write the results as JSON to this file");
  conformance->add_option("--image", conformance_image, "guest ELF instead of the embedded one");
  CLI::App* doctor = app.add_subcommand("doctor", "what runs on this host");
  std::string doctor_image;
  doctor->add_option("--image", doctor_image, "guest ELF instead of the embedded one");
  CLI::App* locks_cmd = app.add_subcommand("locks", "the lock registry");
  for (const char* x86 : {"linux", "lab", "bench", "ctl", "trace-check"})
    app.add_subcommand(x86, "x86-64 only")->group("")->allow_extras();

  // x86's run has many options riscv64's has not (yet): the timeline, the
  // injector, several VMs, vNUMA... Each is refused with one line naming it,
  // as a misspelt option is, instead of CLI11's two-line "not expected".
  run->allow_extras();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "lockvisor: error: %s (see lockvisor --help)\n", e.what());
    return kUsage;
  }
  if (run->parsed() && !run->remaining().empty()) {
    const auto extras = run->remaining();
    const auto option = std::find_if(extras.begin(), extras.end(), [](const std::string& a) { return a.starts_with('-'); });
    if (option != extras.end())
      std::fprintf(stderr,
                   "lockvisor: run: %s is not an option of riscv64's run (x86-64 only, or misspelt; "
                   "`lockvisor run --help` lists them)\n",
                   option->c_str());
    else
      std::fprintf(stderr, "lockvisor: run: unexpected argument '%s' (run takes options only)\n", extras[0].c_str());
    return kUsage;
  }
  try {
    for (const auto* sub : app.get_subcommands()) {
      const std::string name = sub->get_name();
      if (name != "run" && name != "doctor" && name != "locks" && name != "conformance") {
        std::fprintf(stderr, "lockvisor: %s: not on riscv64 yet (x86-64 only)\n", name.c_str());
        return kUsage;
      }
    }
    if (doctor->parsed()) {
      std::vector<std::byte> storage;
      return doctor_command(select_guest_image(doctor_image, storage));
    }
    if (locks_cmd->parsed()) return locks_command();
    if (conformance->parsed()) return conformance_command(conformance_image, conformance_json);

    for (std::size_t i = 0; i < std::size(kX86Only); ++i) {
      if (run->count(kX86Only[i].flag) > 0) {
        std::fprintf(stderr, "lockvisor: %s: %s\n", kX86Only[i].flag, kX86Only[i].why);
        return kUsage;
      }
    }
    arch::riscv64::RvMachineConfig config;
    if (pcpus_option->count() > 0) {
      config.pcpus = host::resolve_pcpus_option(pcpus);
      host::validate_cpus(config.pcpus);
    }
    config.boot.harts = vcpus;
    config.boot.seed = seed;
    config.boot.flags = no_sbi_pvlock ? 0 : abi::kBootFlagSbiPvlock;
    config.boot.sbi_experimental_eid = abi::kSbiExtPvlockExperimentalDefault;
    if (!sbi_eid.empty()) {
      const auto value = parse_hex_u32(sbi_eid);
      if (!value || *value < abi::kSbiExperimentalFirst || *value > abi::kSbiExperimentalLast) {
        std::fprintf(stderr, "lockvisor: --sbi-eid '%s': not a hexadecimal EID of the experimental range\n",
                     sbi_eid.c_str());
        return kUsage;
      }
      config.boot.sbi_experimental_eid = *value;
    }
    config.boot.program = program;
    if (!workload.empty()) {
      experiment::WorkloadSettings w;
      w.workload = workload;
      w.lock = lock;
      w.duration_s = duration;
      experiment::validate(w);
      const auto params = experiment::workload_params(w, seed, vcpus);
      config.boot.workload = params;
      config.boot.program = workload;
      config.boot.args = experiment::guest_args(w, params);
    }
    config.memory_mib = memory_mib;
    config.kick = kick == "proposed" ? KickMode::kProposed : KickMode::kSticky;
    config.timeout_seconds = timeout;
    std::vector<std::byte> storage;
    config.image = select_guest_image(image, storage);
    return run_command(config, kick, json);
  } catch (const Error& e) {
    std::fprintf(stderr, "lockvisor: %s\n", e.what());
    return e.kind() == ErrorKind::kUsage ? kUsage : machine::exit_code(machine::Outcome::kHostError);
  }
}
