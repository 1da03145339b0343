// lockvisor run: boot the guest with one workload (or, with --native, run a
// lock workload on host threads) and report what happened.
#include <fmt/format.h>

#include <memory>

#include "locks/registry.h"
#include "vmm/cli/commands.h"
#include "vmm/cli/machine_options.h"
#include "vmm/guest_image.h"
#include "vmm/host/cpu_set.h"
#include "vmm/kvm/kvm_system.h"
#include "vmm/lockstat/lock_run.h"
#include "vmm/machine/machine.h"
#include "vmm/native/native_runner.h"
#include "vmm/report/run_report.h"
#include "vmm/util/error.h"

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

int finish_lock_run(lockstat::LockRun& run, const std::string& json_path, nlohmann::json extra) {
  auto metrics = lockstat::to_json(run);
  lockstat::print_summary(run, metrics, stdout);
  const auto violations = metrics["violations"].get<std::uint64_t>();
  if (!json_path.empty()) {
    if (!extra.is_null()) metrics["vm"] = std::move(extra);
    report::write_json_file(json_path, metrics);
  }
  if (violations > 0) {
    fmt::print(stderr, "lockvisor: mutual exclusion violated {} times\n", violations);
    return machine::exit_code(machine::Outcome::kGuestFailed);
  }
  return 0;
}

int run_native(RunOptions& o) {
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
  return finish_lock_run(run, o.json, nullptr);
}

int run(RunOptions& o) {
  o.machine.finish();
  auto& config = o.machine.config;
  if (is_lock_workload(o.workload)) validate_lock_options(o);
  if (o.lock.native) {
    if (!is_lock_workload(o.workload)) fail("--native runs lock workloads only (lockbench, uncontended, torture)");
    if (!config.pcpus.empty()) host::validate_cpus(config.pcpus);
    return run_native(o);
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
  // --param goes first: the guest takes the first occurrence of a key, so an
  // explicit --param overrides what the options above generated.
  std::string explicit_params;
  for (const auto& p : o.params) {
    if (p.find('=') == std::string::npos || p.find(' ') != std::string::npos)
      fail("--param '{}': expected key=value without spaces", p);
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
  const auto result = vm.run();
  fmt::print("outcome: {} (exit code {}): {}\n", machine::outcome_name(result.outcome), machine::exit_code(result.outcome),
             result.reason);
  for (const auto& line : result.details) fmt::print("  {}\n", line);
  fmt::print("wall {:.3f} s, first guest entry after {:.1f} ms, first exit after {:.1f} ms\n", result.wall_seconds,
             result.seconds_to_first_entry * 1e3, result.seconds_to_first_exit * 1e3);
  report::print_run_table(result, stdout);
  if (o.workload == "pingpong" && result.outcome == machine::Outcome::kCompleted)
    if (const auto* elapsed = result.result(0, "elapsed_ns")) {
      const double seconds = static_cast<double>(elapsed->values[0]) * 1e-9;
      const std::uint64_t handoffs = (o.rounds ? o.rounds : 1000) * result.vcpus.size();
      fmt::print("pingpong: {} hand-offs in {:.3f} s (guest clock): {:.1f} us per hand-off\n", handoffs, seconds,
                 seconds * 1e6 / static_cast<double>(handoffs));
    }
  const auto run_json = report::run_to_json(result, config);
  if (is_lock_workload(o.workload) && result.outcome == machine::Outcome::kCompleted) {
    auto run = describe_lock_run(o, "guest");
    const auto stats = lockstat::workload_stats_from(result);
    for (std::size_t i = 0; i < stats.size(); ++i) {
      const auto& v = result.vcpus[i];
      const auto stat = [&](const char* name) { return v.kvm.count(name) ? v.kvm.at(name) : 0; };
      std::optional<std::uint64_t> preempted;
      if (!v.kvm.empty()) preempted = stat("preemption_reported") + stat("preemption_other");
      run.samples.push_back({stats[i], v.cpu_seconds, v.involuntary_switches, preempted, v.runqueue_wait_ns});
    }
    run.vmm = lockstat::vmm_counters(result);
    run.host = lockstat::host_info(kvm_kind);
    const int code = finish_lock_run(run, o.json, run_json);
    return code;
  }
  if (!o.json.empty()) report::write_json_file(o.json, run_json);
  return machine::exit_code(result.outcome);
}

}  // namespace

Action add_run_command(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* command = app.add_subcommand("run", "Boot a guest running one workload and report per-vCPU statistics");
  command->add_option("-w,--workload", options->workload, "Workload to run")->check(CLI::IsMember(kWorkloads));
  command->add_option("--rounds", options->rounds, "pingpong: turns each vCPU takes (default 1000)");
  command->add_option("--spin", options->spin, "pingpong: pause iterations before halting");
  command->add_option("--halt", options->halt, "pingpong: hypercall (CPL3 HALT) or kernel (`hlt` at CPL0)")
      ->check(CLI::IsMember({"hypercall", "kernel"}));
  auto& l = options->lock;
  command->add_option("-l,--lock", l.lock, "Lock algorithm for lock workloads (see 'lockvisor locks')");
  command->add_option("--cs", l.cs_ns, "Critical section length, ns");
  command->add_option("--cs-lines", l.cs_lines, "Shared cache lines written in the critical section (1-16)");
  command->add_option("--delay", l.delay_ns, "Work outside the critical section, ns");
  auto* duration = command->add_option("--duration", l.duration_s, "Measured window, seconds");
  command->add_option("--iterations", l.iterations, "Acquisitions per vCPU instead of a duration")->excludes(duration);
  command->add_option("--layout", l.layout, "standalone: lock and data in different cache lines; embedded: same line")
      ->check(CLI::IsMember({"standalone", "embedded"}));
  command->add_option("--locks", l.locks, "torture: number of locks (default 4)");
  command->add_option("--long-hold-ns", l.long_hold_ns, "torture: length of the occasional long hold");
  command->add_option("--long-hold-every", l.long_hold_every, "torture: one long hold per N acquisitions on average");
  command->add_flag("--native", l.native, "Run the lock workload on host threads (no VM), pinned the same way");
  command->add_option("--param", options->params, "Extra workload parameter key=value (repeatable)");
  command->add_option("--json", options->json, "Write the full report as JSON to FILE");
  options->machine.add_to(*command);
  return [options] { return run(*options); };
}

}  // namespace lockvisor::cli
