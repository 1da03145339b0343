// lockvisor run: boot the guest with one workload (or, with --native, run a
// lock workload on host threads) and report what happened.
#include <fmt/format.h>

#include <exception>
#include <memory>
#include <optional>

#include "locks/registry.h"
#include "vmm/cli/commands.h"
#include "vmm/cli/machine_options.h"
#include "vmm/cli/option_checks.h"
#include "vmm/guest_image.h"
#include "vmm/host/cpu_set.h"
#include "vmm/kvm/kvm_system.h"
#include "vmm/lockstat/lock_run.h"
#include "vmm/machine/machine.h"
#include "vmm/native/native_runner.h"
#include "vmm/report/run_report.h"
#include "vmm/util/error.h"
#include "vmm/util/output_file.h"

namespace lockvisor::cli {
namespace {

struct LockOptions {
  std::string lock = "auto";
  std::uint64_t cs_ns = 100;
  std::uint64_t cs_lines = 1;
  std::uint64_t delay_ns = 170;
  double duration_s = 1.0;
  std::uint64_t iterations = 0;
  std::string layout = "standalone";
  std::uint64_t locks = 0;  // 0: the workload's default
  std::uint64_t long_hold_ns = 100000;
  std::uint64_t long_hold_every = 0;  // 0: the workload's default
  bool native = false;
};

struct RunOptions {
  MachineOptions machine;
  std::string workload = "pingpong";
  std::uint64_t rounds = 0;
  std::uint64_t spin = 0;
  std::string halt = "hypercall";
  std::vector<std::string> params;
  std::string json;
  LockOptions lock;
};

const std::vector<std::string> kWorkloads = {"pingpong", "lockbench", "uncontended", "torture", "hello", "empty"};

// Guest parameter keys that run's own options generate (guest/programs/
// lock_workloads.cpp and pingpong.cpp parse them): --param may not set them.
const char* option_for_param(const std::string& key) {
  static const std::pair<const char*, const char*> kOwned[] = {
      {"lock", "--lock"},         {"cs", "--cs"},
      {"cs_lines", "--cs-lines"}, {"delay", "--delay"},
      {"duration_ms", "--duration"}, {"iterations", "--iterations"},
      {"layout", "--layout"},     {"locks", "--locks"},
      {"long_hold_ns", "--long-hold-ns"}, {"long_hold_every", "--long-hold-every"},
      {"rounds", "--rounds"},     {"spin", "--spin"},
      {"halt", "--halt"},
  };
  for (const auto& [name, option] : kOwned)
    if (key == name) return option;
  return nullptr;
}

bool is_lock_workload(const std::string& w) { return w == "lockbench" || w == "uncontended" || w == "torture"; }

abi::WorkloadKind workload_kind(const std::string& w) {
  if (w == "uncontended") return abi::WorkloadKind::kUncontended;
  if (w == "torture") return abi::WorkloadKind::kTorture;
  return abi::WorkloadKind::kLockbench;
}

// The workload parameters exactly as the guest will parse them from BootInfo
// args (guest/programs/lock_workloads.cpp): one source of defaults.
abi::WorkloadParams lock_params(const RunOptions& o, unsigned cpus) {
  const auto kind = workload_kind(o.workload);
  abi::WorkloadParams p{};
  p.kind = kind;
  p.cs_ns = o.lock.cs_ns;
  p.cs_lines = o.lock.cs_lines;
  p.delay_ns = o.lock.delay_ns;
  p.duration_ns = static_cast<std::uint64_t>(o.lock.duration_s * 1e9);
  p.iterations = o.lock.iterations ? o.lock.iterations : (kind == abi::WorkloadKind::kUncontended ? 262144 : 0);
  p.layout = o.lock.layout == "embedded" ? abi::LockLayout::kEmbedded : abi::LockLayout::kStandalone;
  p.seed = o.machine.config.seed;
  p.nlocks = o.lock.locks ? o.lock.locks : (kind == abi::WorkloadKind::kTorture ? 4 : 1);
  p.long_hold_ns = o.lock.long_hold_ns;
  p.long_hold_every = o.lock.long_hold_every ? o.lock.long_hold_every : (kind == abi::WorkloadKind::kTorture ? 2000 : 0);
  p.cpus = cpus;
  return p;
}

nlohmann::json params_json(const abi::WorkloadParams& p, const std::string& layout) {
  return {{"cs_ns", p.cs_ns},           {"cs_lines", p.cs_lines},         {"delay_ns", p.delay_ns},
          {"duration_ns", p.duration_ns}, {"iterations", p.iterations},   {"layout", layout},
          {"seed", p.seed},             {"locks", p.nlocks},              {"long_hold_ns", p.long_hold_ns},
          {"long_hold_every", p.long_hold_every}};
}

std::string guest_args(const abi::WorkloadParams& p, const RunOptions& o) {
  return fmt::format("lock={} cs={} cs_lines={} delay={} duration_ms={} iterations={} layout={} locks={} "
                     "long_hold_ns={} long_hold_every={}",
                     o.lock.lock, p.cs_ns, p.cs_lines, p.delay_ns, p.duration_ns / 1000000, p.iterations,
                     o.lock.layout, p.nlocks, p.long_hold_ns, p.long_hold_every);
}

void validate_lock_options(const RunOptions& o) {
  if (locks::find_lock(o.lock.lock.c_str()) == nullptr)
    fail("--lock '{}': unknown lock (see 'lockvisor locks')", o.lock.lock);
  const bool pv_lock = o.lock.lock == "pvqspinlock" || o.lock.lock == "pvticket";
  if (pv_lock && o.machine.no_pv && !o.lock.native)
    fail("--lock {} needs KVM_FEATURE_PV_UNHALT, which --no-pv hides (use --lock auto to follow the KVM guest's policy)",
         o.lock.lock);
  if (o.lock.cs_lines < 1 || o.lock.cs_lines > 16) fail("--cs-lines {}: must be 1..16", o.lock.cs_lines);
  if (o.lock.locks > 16) fail("--locks {}: at most 16", o.lock.locks);
  if (!(o.lock.duration_s > 0) || o.lock.duration_s > 3600) fail("--duration {}: must be in (0, 3600] seconds", o.lock.duration_s);
}

// The description both modes share; samples, vmm and host are filled by the caller.
lockstat::LockRun describe_lock_run(const RunOptions& o, const char* mode) {
  const auto& config = o.machine.config;
  lockstat::LockRun run;
  run.mode = mode;
  run.lock = o.lock.lock;
  run.workload = o.workload;
  run.cpus = config.vcpus;
  run.pcpus = host::format_cpu_list(config.pcpus);
  run.params = params_json(lock_params(o, config.vcpus), o.lock.layout);
  return run;
}

int finish_native_run(lockstat::LockRun& run, const std::optional<OutputFile>& json) {
  auto metrics = lockstat::to_json(run);
  lockstat::print_summary(run, metrics, stdout);
  const auto violations = metrics["violations"].get<std::uint64_t>();
  if (json) report::write_json_file(*json, metrics);
  if (violations > 0) {
    fmt::print(stderr, "lockvisor: mutual exclusion violated {} times\n", violations);
    return machine::exit_code(machine::Outcome::kGuestFailed);
  }
  return 0;
}

int run_native(RunOptions& o, const std::optional<OutputFile>& json) {
  auto& config = o.machine.config;
  const auto params = lock_params(o, config.vcpus);
  native::NativeRunConfig native_config{o.lock.lock, params, config.pcpus, config.pin == machine::PinPolicy::kSpread};
  fmt::print("lockvisor run --native: {} {} on {} host threads, CPUs {} ({})\n", o.lock.lock, o.workload, config.vcpus,
             host::format_cpu_list(config.pcpus.empty() ? host::allowed_cpus() : config.pcpus),
             config.pcpus.empty() ? "unpinned" : o.machine.pin);
  std::fflush(stdout);
  std::vector<native::NativeThreadUsage> usage;
  const auto stats = native::run_native(native_config, &usage);
  auto run = describe_lock_run(o, "native");
  for (std::size_t i = 0; i < stats.size(); ++i)
    run.samples.push_back({stats[i], usage.at(i).cpu_seconds, usage.at(i).involuntary_switches, std::nullopt, std::nullopt});
  run.host = lockstat::host_info("none (native)");
  return finish_native_run(run, json);
}

struct GuestLockReport {
  lockstat::LockRun run;
  nlohmann::json metrics;
};

// The lock statistics of a completed guest run, and what they make of it: a
// guest that completed but reported no usable statistics ran badly (a guest
// fault, exit 3); one that saw a mutual-exclusion violation failed (exit 1).
// Decided before the outcome line is printed, so that line and exit code agree.
std::optional<GuestLockReport> guest_lock_report(const RunOptions& o, machine::RunResult& result,
                                                 const std::string& kvm_kind) {
  try {
    GuestLockReport report{describe_lock_run(o, "guest"), nullptr};
    const auto stats = lockstat::workload_stats_from(result);
    for (std::size_t i = 0; i < stats.size(); ++i) {
      const auto& v = result.vcpus.at(i);
      const auto stat = [&](const char* name) { return v.kvm.count(name) ? v.kvm.at(name) : 0; };
      std::optional<std::uint64_t> preempted;
      if (!v.kvm.empty()) preempted = stat("preemption_reported") + stat("preemption_other");
      report.run.samples.push_back({stats[i], v.cpu_seconds, v.involuntary_switches, preempted, v.runqueue_wait_ns});
    }
    report.run.vmm = lockstat::vmm_counters(result);
    report.run.host = lockstat::host_info(kvm_kind);
    report.metrics = lockstat::to_json(report.run);
    if (const auto violations = report.metrics["violations"].get<std::uint64_t>(); violations > 0) {
      result.outcome = machine::Outcome::kGuestFailed;
      result.reason = fmt::format("mutual exclusion violated {} times", violations);
    }
    return report;
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kGuest) throw;
    result.outcome = machine::Outcome::kGuestFault;
    result.reason = e.what();
    return std::nullopt;
  }
}

// The exit code main() gives an Error of this kind (README.md, "Exit codes").
int exit_code_of(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kUsage: return machine::exit_code(machine::Outcome::kUsageError);
    case ErrorKind::kGuest: return machine::exit_code(machine::Outcome::kGuestFault);
    case ErrorKind::kHost: break;
  }
  return machine::exit_code(machine::Outcome::kHostError);
}

int run(RunOptions& o) {
  o.machine.finish();
  auto& config = o.machine.config;
  if (is_lock_workload(o.workload)) validate_lock_options(o);
  // Checked now, not after a run that may have taken minutes: a --json that
  // cannot be written is a bad command line (exit 2) before anything boots.
  std::optional<OutputFile> json;
  if (!o.json.empty()) json.emplace(o.json, "--json");
  if (o.lock.native) {
    if (!is_lock_workload(o.workload)) fail("--native runs lock workloads only (lockbench, uncontended, torture)");
    if (!config.pcpus.empty()) host::validate_cpus(config.pcpus);
    return run_native(o, json);
  }
  config.program = o.workload;
  std::string args;
  if (is_lock_workload(o.workload)) {
    args = guest_args(lock_params(o, config.vcpus), o);
    // A lock workload runs for --duration; give the watchdog room by default.
    if (config.timeout_s == 0) config.timeout_s = o.lock.duration_s * 10 + 60;
  } else {
    if (o.rounds > 0) args += fmt::format("rounds={} ", o.rounds);
    if (o.spin > 0) args += fmt::format("spin={} ", o.spin);
    if (o.halt != "hypercall") args += fmt::format("halt={} ", o.halt);
  }
  // --param passes keys that have no option of their own. A key that has
  // one is refused: the guest takes the first occurrence of a key, so the
  // --param would silently override the validated option while the report
  // showed the option's value.
  std::string explicit_params;
  for (const auto& p : o.params) {
    if (p.find('=') == std::string::npos || p.find(' ') != std::string::npos)
      fail("--param '{}': expected key=value without spaces", p);
    if (const char* option = option_for_param(p.substr(0, p.find('='))))
      fail("--param '{}': '{}' has its own option, {}; use that", p, p.substr(0, p.find('=')), option);
    explicit_params += p + ' ';
  }
  args = explicit_params + args;
  while (!args.empty() && args.back() == ' ') args.pop_back();
  config.args = args;

  machine::validate_config(config);
  std::vector<std::byte> storage;
  const auto image = select_guest_image(o.machine.image, storage);
  machine::validate_image(config, image);
  const auto origin = std::chrono::steady_clock::now();
  const auto kvm = kvm::KvmSystem::open();
  machine::Machine vm(kvm, config, image, origin);
  const std::string kvm_kind = kvm::backend_name(kvm::detect_backend());
  fmt::print("lockvisor run: workload {} ({}), {} vCPUs on host CPUs {} ({}), kick {}, KVM {}\n", o.workload,
             args.empty() ? "defaults" : args, config.vcpus,
             host::format_cpu_list(config.pcpus.empty() ? host::allowed_cpus() : config.pcpus),
             config.pcpus.empty() ? "unpinned" : o.machine.pin, o.machine.kick, kvm_kind);
  std::fflush(stdout);
  auto result = vm.run();
  // Everything that decides the exit code happens before the outcome line is
  // printed: lock statistics (missing ones are a guest fault, a violation a
  // failure) and the JSON file (if writing it fails, the line says so).
  std::optional<GuestLockReport> lock_report;
  if (is_lock_workload(o.workload) && result.outcome == machine::Outcome::kCompleted)
    lock_report = guest_lock_report(o, result, kvm_kind);
  int code = machine::exit_code(result.outcome);
  std::exception_ptr json_error;
  if (json) {
    try {
      auto run_json = report::run_to_json(result, config);
      if (lock_report) {
        lock_report->metrics["settings"] = run_json["settings"];  // report/settings_json.h
        lock_report->metrics["vm"] = std::move(run_json);
        report::write_json_file(*json, lock_report->metrics);
      } else {
        report::write_json_file(*json, run_json);
      }
    } catch (const Error& e) {
      json_error = std::current_exception();
      code = exit_code_of(e.kind());
    }
  }
  fmt::print("outcome: {}{} (exit code {}): {}\n", machine::outcome_name(result.outcome),
             json_error ? ", --json not written" : "", code, result.reason);
  for (const auto& line : result.details) fmt::print("  {}\n", line);
  fmt::print("wall {:.3f} s, first guest entry after {:.1f} ms, first exit after {:.1f} ms\n", result.wall_seconds,
             result.seconds_to_first_entry * 1e3, result.seconds_to_first_exit * 1e3);
  report::print_run_table(result, stdout);
  if (o.workload == "pingpong" && result.outcome == machine::Outcome::kCompleted) {
    if (const auto* elapsed = result.result(0, "elapsed_ns"); elapsed != nullptr && elapsed->values.size() != 1) {
      // Guest-reported: an array, even an empty one, is no elapsed time.
      fmt::print("pingpong: the guest's elapsed_ns report has {} values, not 1: no hand-off rate\n",
                 elapsed->values.size());
    } else if (elapsed != nullptr) {
      const double seconds = static_cast<double>(elapsed->values[0]) * 1e-9;
      const std::uint64_t handoffs = (o.rounds ? o.rounds : 1000) * result.vcpus.size();
      fmt::print("pingpong: {} hand-offs in {:.3f} s (guest clock): {:.1f} us per hand-off\n", handoffs, seconds,
                 seconds * 1e6 / static_cast<double>(handoffs));
    }
  }
  if (lock_report) lockstat::print_summary(lock_report->run, lock_report->metrics, stdout);
  if (json_error) std::rethrow_exception(json_error);  // main() prints it: one line, the same exit code
  return code;
}

}  // namespace

Action add_run_command(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* command = app.add_subcommand("run", "Boot a guest running one workload and report per-vCPU statistics");
  command->add_option("-w,--workload", options->workload, "Workload to run")->check(CLI::IsMember(kWorkloads));
  // Every count is range-checked on its text (option_checks.h): CLI11 alone
  // would turn "-1" into 2^64 - 1.
  command->add_option("--rounds", options->rounds, "pingpong: turns each vCPU takes, up to 10^12 (0: default 1000)")
      ->transform(unsigned_in(0, 1000000000000));
  command->add_option("--spin", options->spin, "pingpong: pause iterations before halting, up to 10^9")
      ->transform(unsigned_in(0, 1000000000));
  command->add_option("--halt", options->halt, "pingpong: hypercall (CPL3 HALT) or kernel (`hlt` at CPL0)")
      ->check(CLI::IsMember({"hypercall", "kernel"}));
  auto& l = options->lock;
  command->add_option("-l,--lock", l.lock, "Lock algorithm for lock workloads (see 'lockvisor locks')");
  command->add_option("--cs", l.cs_ns, "Critical section length, ns (at most 1 s)")->transform(unsigned_in(0, 1000000000));
  command->add_option("--cs-lines", l.cs_lines, "Shared cache lines written in the critical section (1-16)")
      ->transform(unsigned_in(1, 16));
  command->add_option("--delay", l.delay_ns, "Work outside the critical section, ns (at most 1 s)")
      ->transform(unsigned_in(0, 1000000000));
  auto* duration = command->add_option("--duration", l.duration_s, "Measured window, seconds (0.001..3600)")
                       ->check(seconds_in(0.001, 3600));
  command->add_option("--iterations", l.iterations, "Acquisitions per vCPU instead of a duration, up to 10^12")
      ->transform(unsigned_in(0, 1000000000000))
      ->excludes(duration);
  command->add_option("--layout", l.layout, "standalone: lock and data in different cache lines; embedded: same line")
      ->check(CLI::IsMember({"standalone", "embedded"}));
  command->add_option("--locks", l.locks, "torture: number of locks, up to 16 (0: default 4)")
      ->transform(unsigned_in(0, 16));
  command->add_option("--long-hold-ns", l.long_hold_ns, "torture: length of the occasional long hold (at most 1 s)")
      ->transform(unsigned_in(0, 1000000000));
  command->add_option("--long-hold-every", l.long_hold_every,
                      "torture: one long hold per N acquisitions on average, up to 10^9 (0: default 2000)")
      ->transform(unsigned_in(0, 1000000000));
  command->add_flag("--native", l.native, "Run the lock workload on host threads (no VM), pinned the same way");
  command->add_option("--param", options->params, "Extra workload parameter key=value (repeatable)");
  command->add_option("--json", options->json,
                      "Write the full report as JSON to FILE"
                      " (absent or a regular file, checked first; replaced atomically)");
  options->machine.add_to(*command);
  return [options] { return run(*options); };
}

}  // namespace lockvisor::cli
