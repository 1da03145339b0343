// lockvisor run: boot the guest with one workload (or, with --native, run a
// lock workload on host threads) and report what happened.
#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <new>
#include <optional>

#include "locks/registry.h"
#include "vmm/cli/commands.h"
#include "vmm/cli/linux_guest_run.h"
#include "vmm/cli/machine_options.h"
#include "vmm/cli/option_checks.h"
#include "vmm/control/control_service.h"
#include "vmm/experiment/workload_settings.h"
#include "vmm/guest_image.h"
#include "vmm/host/cpu_set.h"
#include "vmm/inject/inject_spec.h"
#include "vmm/inject/injector.h"
#include "vmm/kvm/kvm_system.h"
#include "vmm/lockstat/lock_run.h"
#include "vmm/machine/machine.h"
#include "vmm/multivm/host_hogs.h"
#include "vmm/multivm/start_gate.h"
#include "vmm/native/native_env.h"
#include "vmm/native/native_runner.h"
#include "vmm/report/pingpong_rate.h"
#include "vmm/report/run_report.h"
#include "vmm/trace/trace.h"
#include "vmm/trace/trace_service.h"
#include "vmm/trace/trace_window.h"
#include "vmm/trace/trace_writer.h"
#include "vmm/util/error.h"
#include "vmm/util/output_file.h"

namespace lockvisor::cli {
namespace {

// The workload side of the experiment (its defaults: vmm/experiment/), plus
// --native, which picks where it runs.
struct LockOptions {
  experiment::WorkloadSettings w;
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
  std::string api;  // --api SOCK: the control socket (vmm/control/)
  std::vector<std::string> inject;  // --inject values (docs/preemption.md)
  std::string trace;
  std::uint64_t trace_max_events = trace::TraceOptions{}.max_events;
  std::string trace_window = "all";
  std::string trace_merge_short;
  LockOptions lock;
  // --kernel: an unmodified Linux kernel instead of the freestanding guest.
  LinuxOptions linux_guest;
  // Several VMs side by side (multi_vm_command.cpp), host CPU hogs, and the
  // start gate a child VM of a multi-VM run waits at (multivm/start_gate.h).
  std::vector<std::string> vms;
  unsigned hogs = 0;
  int start_gate_fd = -1;
  const CLI::App* command = nullptr;
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

using experiment::is_lock_workload;

// --inject: parsed, checked against the VM, and recorded in the config (the
// report's settings and the guest's BootInfo::lock_probe).
std::vector<inject::InjectSpec> inject_specs(const RunOptions& o, machine::MachineConfig& config) {
  std::vector<inject::InjectSpec> specs;
  for (const auto& value : o.inject)
    for (auto& s : inject::parse_inject_specs(value)) specs.push_back(std::move(s));
  if (specs.empty()) return specs;
  if (o.lock.native) fail("--inject works on VMs only (not with --native)");
  inject::validate_inject_specs(specs, config.vcpus);
  for (const auto& s : specs) {
    if (s.targeted() && !is_lock_workload(o.workload))
      fail("--inject '{}': targeted schedules need a lock workload (lockbench, uncontended, torture)",
           inject::format_inject_spec(s));
    config.inject.push_back(inject::format_inject_spec(s));
  }
  config.lock_probe = inject::lock_probe_config(specs, config.seed);
  return specs;
}

abi::WorkloadParams lock_params(const RunOptions& o, unsigned cpus) {
  return experiment::workload_params(o.lock.w, o.machine.config.seed, cpus);
}

void validate_lock_options(const RunOptions& o) {
  experiment::validate(o.lock.w);
  const locks::LockInfo* info = locks::find_lock(o.lock.w.lock.c_str());
  if (info != nullptr && info->needs_pv && o.machine.no_pv && !o.lock.native)
    fail("--lock {} needs KVM_FEATURE_PV_UNHALT, which --no-pv hides (use --lock auto to follow the KVM guest's policy)",
         o.lock.w.lock);
}

// The watchdog: --timeout, or for a lock workload room past its --duration.
double default_timeout(const RunOptions& o) {
  const double given = o.machine.config.timeout_s;
  if (given != 0 || !is_lock_workload(o.workload)) return given;
  return o.lock.w.duration_s * 10 + 60;
}

// The description both modes share; samples, vmm and host are filled by the caller.
lockstat::LockRun describe_lock_run(const RunOptions& o, const char* mode) {
  const auto& config = o.machine.config;
  lockstat::LockRun run;
  run.mode = mode;
  run.lock = o.lock.w.lock;
  run.workload = o.workload;
  run.cpus = config.vcpus;
  run.pcpus = host::format_cpu_list(config.pcpus);
  run.params = experiment::params_json(lock_params(o, config.vcpus));
  return run;
}

int finish_native_run(lockstat::LockRun& run, const std::optional<OutputFile>& json, const nlohmann::json& extras) {
  auto metrics = lockstat::to_json(run);
  metrics.update(extras);
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
  native::NativeRunConfig native_config{o.lock.w.lock, params, config.pcpus, config.pin == machine::PinPolicy::kSpread};
  // Lock parameters (--param pvb_*=...) apply to host threads as in the guest.
  if (const char* bad = native::apply_lock_tuning(o.params)) fail("--param '{}': not a valid value for that key", bad);
  fmt::print("lockvisor run --native: {} {} on {} host threads, CPUs {} ({})\n", o.lock.w.lock, o.workload, config.vcpus,
             host::format_cpu_list(config.pcpus.empty() ? host::allowed_cpus() : config.pcpus),
             config.pcpus.empty() ? "unpinned" : o.machine.pin);
  std::fflush(stdout);
  std::vector<native::NativeThreadUsage> usage;
  std::optional<multivm::HostHogs> hogs;
  if (o.hogs > 0) hogs.emplace(o.hogs, config.pcpus);
  const auto stats = native::run_native(native_config, &usage);
  nlohmann::json extras = nlohmann::json::object();
  if (hogs) {
    extras["hogs"] = hogs->stop();
    fmt::print("{}\n", multivm::hogs_line(extras["hogs"]));
  }
  auto run = describe_lock_run(o, "native");
  for (std::size_t i = 0; i < stats.size(); ++i)
    run.samples.push_back({stats[i], usage.at(i).cpu_seconds, usage.at(i).involuntary_switches, std::nullopt, std::nullopt,
                           usage.at(i).window});
  run.host = lockstat::host_info("none (native)");
  return finish_native_run(run, json, extras);
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
      report.run.samples.push_back(
          {stats[i], v.cpu_seconds, v.involuntary_switches, preempted, v.runqueue_wait_ns, lockstat::window_usage(v)});
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

// The trace file after a run: the window resolved and the file written, or
// why not. A trace that cannot be written costs the run nothing but its own
// file (one line, and the exit code of the failure: 6 for a host write
// error, 2 for an unusable path).
struct TraceOutcome {
  std::string line;
  std::optional<std::string> error;
};
TraceOutcome write_trace_file(const RunOptions& o, trace::Trace& timeline, OutputFile& file,
                              const trace::TraceWindowSpec& window, machine::Outcome outcome, int& code);

int run_linux(RunOptions& o, const std::optional<OutputFile>& json, std::optional<OutputFile>& trace_file,
              const trace::TraceWindowSpec& window, std::uint64_t merge_short_ns) {
  auto& config = o.machine.config;
  // First, before any file is read: PVM runs no ordinary kernel.
  machine::refuse_linux_on_pvm();
  const CLI::App& cmd = *o.command;
  if (o.lock.native) fail("--kernel: not with --native (a kernel needs a VM)");
  if (!o.params.empty()) fail("--param: the freestanding guest's parameters; a Linux guest takes --append");
  if (cmd.count("--backend") > 0 && config.backend_kind != pvlock::BackendKind::kKvm)
    fail("--kernel: a Linux guest uses KVM's in-kernel PV lock hypercalls (--backend kvm)");
  config.backend_kind = pvlock::BackendKind::kKvm;
  if (cmd.count("--workload") == 0) o.workload = "hello";
  if (!is_linux_workload(o.workload))
    fail("--workload {}: with --kernel, one of {}", o.workload, fmt::join(linux_workloads(), ", "));
  if (cmd.count("--memory") == 0) config.memory_mib = kLinuxDefaultMemoryMib;
  LinuxOptions lx = o.linux_guest;
  lx.workload = o.workload;
  lx.duration_ms = static_cast<std::uint64_t>(o.lock.w.duration_s * 1000 + 0.5);
  // A kernel that never reaches its init must still end: boot (minutes in
  // the emulated nested machine) plus the workload.
  if (config.timeout_s == 0) config.timeout_s = kLinuxBootAllowanceS + 2 * o.lock.w.duration_s;
  std::vector<inject::InjectSpec> specs;
  for (const auto& value : o.inject)
    for (auto& s : inject::parse_inject_specs(value)) {
      if (s.targeted())
        fail("--inject '{}': holder and waiter schedules need the guest's lock log, which a Linux guest has not; "
             "use periodic or random", inject::format_inject_spec(s));
      specs.push_back(std::move(s));
    }
  if (!specs.empty()) {
    inject::validate_inject_specs(specs, config.vcpus);
    for (const auto& s : specs) config.inject.push_back(inject::format_inject_spec(s));
  }
  if (window.kind == trace::TraceWindowSpec::Kind::kWorstWait)
    fail("--trace-window worst-wait: needs the guest's lock log, which a Linux guest has not");
  config.program = "linux";
  machine::validate_config(config);
  PreparedLinuxGuest guest(lx, config);
  std::unique_ptr<control::ControlService> api;
  if (!o.api.empty()) api = std::make_unique<control::ControlService>(o.api);
  const auto origin = std::chrono::steady_clock::now();
  const auto kvm = kvm::KvmSystem::open();
  machine::Machine vm(kvm, config, guest.machine_guest(), origin);
  if (api) vm.add_service(std::move(api));
  if (!specs.empty()) vm.add_service(std::make_unique<inject::Injector>(std::move(specs), config.seed, config.vcpus));
  std::optional<trace::Trace> timeline;
  if (trace_file) {
    timeline.emplace(trace::TraceOptions{o.trace_max_events, merge_short_ns});
    vm.add_service(std::make_unique<trace::TraceService>(*timeline));
  }
  const std::string kvm_kind = kvm::backend_name(kvm::detect_backend());
  fmt::print("lockvisor run: Linux {} ({}), guest lock {}, workload {}, {} vCPUs on host CPUs {} ({}), KVM {}\n",
             o.linux_guest.kernel, guest.own_init() ? "lockvisor's initramfs" : o.linux_guest.initrd,
             lx.guest_lock, o.workload, config.vcpus,
             host::format_cpu_list(config.pcpus.empty() ? host::allowed_cpus() : config.pcpus),
             config.pcpus.empty() ? "unpinned" : o.machine.pin, kvm_kind);
  std::fflush(stdout);
  nlohmann::json extras = nlohmann::json::object();
  if (o.start_gate_fd >= 0) extras["start_gate"] = {{"start_monotonic_ns", multivm::wait_at_start_gate(o.start_gate_fd)}};
  std::optional<multivm::HostHogs> hogs;
  if (o.hogs > 0) hogs.emplace(o.hogs, config.pcpus);
  auto result = vm.run();
  if (hogs) extras["hogs"] = hogs->stop();
  const auto report = guest.init_report();
  const auto spinlock = guest.kernel_spinlock(report);
  int code = machine::exit_code(result.outcome);
  if (code == 0) code = linux_exit_code(guest, report, result);
  std::exception_ptr json_error;
  if (json) {
    try {
      auto run_json = report::run_to_json(result, config);
      run_json["linux"] = linux_guest_json(guest, report, spinlock, result);
      run_json.update(extras);
      report::write_json_file(*json, run_json);
    } catch (const Error& e) {
      json_error = std::current_exception();
      code = exit_code_of(e.kind());
    }
  }
  TraceOutcome traced;
  if (timeline) traced = write_trace_file(o, *timeline, *trace_file, window, result.outcome, code);
  fmt::print("outcome: {}{}{} (exit code {}): {}\n", machine::outcome_name(result.outcome),
             json_error ? ", --json not written" : "", traced.error ? ", --trace not written" : "", code, result.reason);
  for (const auto& line : result.details) fmt::print("  {}\n", line);
  fmt::print("wall {:.3f} s, first guest entry after {:.1f} ms\n", result.wall_seconds,
             result.seconds_to_first_entry * 1e3);
  report::print_run_table(result, stdout);
  if (extras.contains("hogs")) fmt::print("{}\n", multivm::hogs_line(extras["hogs"]));
  print_linux_summary(report, spinlock, guest.policy(), result);
  if (!traced.line.empty()) fmt::print("{}\n", traced.line);
  if (traced.error) fmt::print(stderr, "lockvisor: --trace {}: not written: {}\n", o.trace, *traced.error);
  if (json_error) std::rethrow_exception(json_error);
  return code;
}

TraceOutcome write_trace_file(const RunOptions& o, trace::Trace& timeline, OutputFile& file,
                              const trace::TraceWindowSpec& window, machine::Outcome outcome, int& code) {
  // The trace comes after the results: a trace that cannot be written costs
  // the run nothing but its own file (one line, and the exit code of the
  // failure: 6 for a host write error, 2 for an unusable path).
  TraceOutcome out;
  {
    try {
      timeline.metadata()["outcome"] = machine::outcome_name(outcome);
      std::string window_note;
      const auto resolved = trace::resolve_trace_window(window, timeline, &window_note);
      if (!window_note.empty()) timeline.metadata()["window"] = {{"spec", o.trace_window}, {"note", window_note}};
      const std::string text = trace::to_trace_json(timeline, resolved ? &*resolved : nullptr);
      file.write(text);
      std::string shown;
      if (resolved && resolved->description.contains("worst_wait")) {
        const auto& w = resolved->description["worst_wait"];
        shown = fmt::format(", window {:.3f}..{:.3f} ms around the worst lock wait ({:.3f} ms, vCPU {})",
                            resolved->description["begin_us"].get<double>() / 1e3,
                            resolved->description["end_us"].get<double>() / 1e3, w["wait_us"].get<double>() / 1e3,
                            w["vcpu"].get<unsigned>());
      } else if (resolved) {
        shown = fmt::format(", window {:.3f}..{:.3f} ms", resolved->description["begin_us"].get<double>() / 1e3,
                            resolved->description["end_us"].get<double>() / 1e3);
      } else if (!window_note.empty()) {
        shown = ", " + window_note;
      }
      out.line = fmt::format("trace: {} ({} MiB, {} events dropped{}; docs/trace.md)", file.path(),
                               (text.size() + (1u << 19)) >> 20, timeline.dropped_events(), shown);
    } catch (const Error& e) {
      out.error = e.what();
      if (code == 0) code = exit_code_of(e.kind());
    } catch (const std::bad_alloc&) {
      out.error = "out of memory while building the trace";
      if (code == 0) code = exit_code_of(ErrorKind::kHost);
    }
  }
  return out;
}

int run(RunOptions& o) {
  if (!o.vms.empty()) return run_multi_vm(*o.command, o.vms, o.hogs, o.json);
  o.lock.w.workload = o.workload;
  o.machine.finish();
  auto& config = o.machine.config;
  if (is_lock_workload(o.workload)) validate_lock_options(o);
  // Checked now, not after a run that may have taken minutes: a --json that
  // cannot be written is a bad command line (exit 2) before anything boots.
  std::optional<OutputFile> json;
  if (!o.json.empty()) json.emplace(o.json, "--json");
  auto specs = inject_specs(o, config);
  std::optional<OutputFile> trace_file;
  if (!o.trace.empty()) trace_file.emplace(o.trace, "--trace");
  const auto window = trace::parse_trace_window(o.trace_window);
  std::uint64_t merge_short_ns = 0;
  if (!o.trace_merge_short.empty()) {
    if (!trace_file) fail("--trace-merge-short '{}': needs --trace FILE", o.trace_merge_short);
    merge_short_ns = trace::parse_trace_duration("--trace-merge-short", o.trace_merge_short);
  }

  if (window.kind != trace::TraceWindowSpec::Kind::kAll) {
    if (!trace_file) fail("--trace-window '{}': needs --trace FILE", o.trace_window);
    if (window.kind == trace::TraceWindowSpec::Kind::kWorstWait && !is_lock_workload(o.workload))
      fail("--trace-window worst-wait: needs a lock workload (lockbench, uncontended, torture)");
  }
  for (const char* linux_only : {"--initrd", "--append", "--guest-lock", "--kvmclock"})
    if (o.command->count(linux_only) > 0 && o.linux_guest.kernel.empty()) fail("{}: needs --kernel FILE", linux_only);
  if (!o.linux_guest.kernel.empty()) return run_linux(o, json, trace_file, window, merge_short_ns);
  if (std::find(kWorkloads.begin(), kWorkloads.end(), o.workload) == kWorkloads.end())
    fail("--workload {}: not one of {} (a Linux guest's: --kernel)", o.workload, fmt::join(kWorkloads, ", "));
  if (o.lock.native) {
    if (trace_file) fail("--trace: not with --native (the timeline is the VM's)");
    if (!is_lock_workload(o.workload)) fail("--native runs lock workloads only (lockbench, uncontended, torture)");
    if (o.start_gate_fd >= 0) fail("--start-gate-fd starts VMs; --native runs none");
    if (!o.api.empty()) fail("--api drives a VM; --native runs no VM");
    if (!config.pcpus.empty()) host::validate_cpus(config.pcpus);
    return run_native(o, json);
  }
  config.program = o.workload;
  std::string args;
  if (is_lock_workload(o.workload)) {
    // The guest reads the binary record (BootInfo::workload); args is only
    // the readable description printed below.
    config.workload = lock_params(o, config.vcpus);
    args = experiment::guest_args(o.lock.w, *config.workload);
    config.timeout_s = default_timeout(o);
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
  // Like --json, a bad --api path fails before anything boots; the socket
  // is listening (0600) from here on and served once the VM runs.
  std::unique_ptr<control::ControlService> api;
  if (!o.api.empty()) api = std::make_unique<control::ControlService>(o.api);
  const auto origin = std::chrono::steady_clock::now();
  const auto kvm = kvm::KvmSystem::open();
  machine::Machine vm(kvm, config, image, origin);
  if (api) vm.add_service(std::move(api));
  if (!specs.empty()) vm.add_service(std::make_unique<inject::Injector>(std::move(specs), config.seed, config.vcpus));
  std::optional<trace::Trace> timeline;
  if (trace_file) {
    timeline.emplace(trace::TraceOptions{o.trace_max_events, merge_short_ns});
    vm.add_service(std::make_unique<trace::TraceService>(*timeline));
  }
  const std::string kvm_kind = kvm::backend_name(kvm::detect_backend());
  fmt::print("lockvisor run: workload {} ({}), {} vCPUs on host CPUs {} ({}), kick {}, KVM {}\n", o.workload,
             args.empty() ? "defaults" : args, config.vcpus,
             host::format_cpu_list(config.pcpus.empty() ? host::allowed_cpus() : config.pcpus),
             config.pcpus.empty() ? "unpinned" : o.machine.pin, o.machine.kick, kvm_kind);
  std::fflush(stdout);
  // A VM of a multi-VM run: built; now wait until every sibling is too.
  nlohmann::json extras = nlohmann::json::object();
  if (o.start_gate_fd >= 0) {
    const auto opened = multivm::wait_at_start_gate(o.start_gate_fd);
    extras["start_gate"] = {{"start_monotonic_ns", opened}};
  }
  std::optional<multivm::HostHogs> hogs;
  if (o.hogs > 0) hogs.emplace(o.hogs, config.pcpus);
  auto result = vm.run();
  if (hogs) extras["hogs"] = hogs->stop();
  if (extras.contains("start_gate")) {
    // steady_clock is CLOCK_MONOTONIC here (libstdc++ on Linux): comparable
    // with the siblings' and the parent's clocks.
    const auto origin_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(origin.time_since_epoch()).count();
    extras["start_gate"]["first_entry_monotonic_ns"] =
        static_cast<std::int64_t>(origin_ns + result.seconds_to_first_entry * 1e9);
  }
  // Everything that decides the exit code happens before the outcome line is
  // printed: lock statistics (missing ones are a guest fault, a violation a
  // failure) and the JSON file (if writing it fails, the line says so).
  std::optional<GuestLockReport> lock_report;
  if (is_lock_workload(o.workload) && result.outcome == machine::Outcome::kCompleted)
    lock_report = guest_lock_report(o, result, kvm_kind);
  // pingpong's rate comes from a guest-reported time: unusable is exit 3.
  std::optional<report::PingpongRate> pingpong;
  if (o.workload == "pingpong") pingpong = report::pingpong_rate(result, o.rounds);
  int code = machine::exit_code(result.outcome);
  std::exception_ptr json_error;
  if (json) {
    try {
      auto run_json = report::run_to_json(result, config);
      if (lock_report) {
        lock_report->metrics["settings"] = run_json["settings"];  // report/settings_json.h
        lock_report->metrics["vm"] = std::move(run_json);
        lock_report->metrics.update(extras);
        report::write_json_file(*json, lock_report->metrics);
      } else {
        run_json.update(extras);
        report::write_json_file(*json, run_json);
      }
    } catch (const Error& e) {
      json_error = std::current_exception();
      code = exit_code_of(e.kind());
    }
  }
  TraceOutcome traced;
  if (timeline) traced = write_trace_file(o, *timeline, *trace_file, window, result.outcome, code);
  const std::optional<std::string>& trace_error = traced.error;
  const std::string& trace_line = traced.line;
  fmt::print("outcome: {}{}{} (exit code {}): {}\n", machine::outcome_name(result.outcome),
             json_error ? ", --json not written" : "", trace_error ? ", --trace not written" : "", code, result.reason);
  for (const auto& line : result.details) fmt::print("  {}\n", line);
  fmt::print("wall {:.3f} s, first guest entry after {:.1f} ms, first exit after {:.1f} ms\n", result.wall_seconds,
             result.seconds_to_first_entry * 1e3, result.seconds_to_first_exit * 1e3);
  report::print_run_table(result, stdout);
  if (extras.contains("hogs")) fmt::print("{}\n", multivm::hogs_line(extras["hogs"]));
  if (pingpong)
    fmt::print("pingpong: {} hand-offs in {:.3f} s (guest clock): {:.1f} us per hand-off\n", pingpong->handoffs,
               pingpong->seconds, pingpong->us_per_handoff);
  if (lock_report) lockstat::print_summary(lock_report->run, lock_report->metrics, stdout);
  if (!trace_line.empty()) fmt::print("{}\n", trace_line);
  if (trace_error) fmt::print(stderr, "lockvisor: --trace {}: not written: {}\n", o.trace, *trace_error);
  if (json_error) std::rethrow_exception(json_error);  // main() prints it: one line, the same exit code
  return code;
}

}  // namespace

namespace {

void add_run_options(CLI::App* command, const std::shared_ptr<RunOptions>& options) {
  // Checked in run(): the freestanding guest and a Linux guest's init have
  // different workloads.
  command->add_option("-w,--workload", options->workload,
                      fmt::format("Workload to run: {} (with --kernel: {})", fmt::join(kWorkloads, ", "),
                                  fmt::join(linux_workloads(), ", ")));
  auto& lx = options->linux_guest;
  command->add_option("--kernel", lx.kernel,
                      "Boot this Linux bzImage instead of lockvisor's guest (hardware KVM or tools/nested-kvm; "
                      "docs/linux-guests.md)");
  command->add_option("--initrd", lx.initrd, "--kernel: this initramfs instead of lockvisor's (its /init runs --workload)");
  command->add_option("--append", lx.append, "--kernel: more kernel command line, after lockvisor's own");
  command->add_option("--guest-lock", lx.guest_lock,
                      "--kernel: the kernel's spinlock, chosen through CPUID: pv (PV qspinlock), tas (virt_spin_lock "
                      "test-and-set), native (qspinlock)")
      ->check(CLI::IsMember({"pv", "tas", "native"}))
      ->default_str("pv");
  command->add_option_function<std::string>(
             "--kvmclock", [&lx](const std::string& v) { lx.kvmclock = v == "on"; },
             "--kernel: offer the kvmclock clocksource (default on)")
      ->check(CLI::IsMember({"on", "off"}));
  // Every count is range-checked on its text (option_checks.h): CLI11 alone
  // would turn "-1" into 2^64 - 1.
  command->add_option("--rounds", options->rounds, "pingpong: turns each vCPU takes, up to 10^12 (0: default 1000)")
      ->transform(unsigned_in(0, 1000000000000));
  command->add_option("--spin", options->spin, "pingpong: pause iterations before halting, up to 10^9")
      ->transform(unsigned_in(0, 1000000000));
  command->add_option("--halt", options->halt, "pingpong: hypercall (CPL3 HALT) or kernel (`hlt` at CPL0)")
      ->check(CLI::IsMember({"hypercall", "kernel"}));
  auto& l = options->lock;
  auto& w = l.w;
  const experiment::WorkloadSettings defaults;
  command->add_option("-l,--lock", w.lock, "Lock algorithm for lock workloads (see 'lockvisor locks')")
      ->default_str(defaults.lock);
  command->add_option("--cs", w.cs_ns, "Critical section length, ns (at most 1 s)")
      ->transform(unsigned_in(0, 1000000000))
      ->default_str(std::to_string(defaults.cs_ns));
  command->add_option("--cs-lines", w.cs_lines, "Shared cache lines written in the critical section (1-16)")
      ->transform(unsigned_in(1, 16))
      ->default_str(std::to_string(defaults.cs_lines));
  command->add_option("--delay", w.delay_ns, "Work outside the critical section, ns (at most 1 s)")
      ->transform(unsigned_in(0, 1000000000))
      ->default_str(std::to_string(defaults.delay_ns));
  auto* duration = command->add_option("--duration", w.duration_s, "Measured window, seconds (0.001..3600)")
                       ->check(seconds_in(0.001, 3600))
                       ->default_str(fmt::format("{}", defaults.duration_s));
  command->add_option("--iterations", w.iterations, "Acquisitions per vCPU instead of a duration, up to 10^12")
      ->transform(unsigned_in(0, 1000000000000))
      ->excludes(duration);
  command->add_option("--layout", w.layout, "standalone: lock and data in different cache lines; embedded: same line")
      ->check(CLI::IsMember({"standalone", "embedded"}))
      ->default_str(defaults.layout);
  command
      ->add_option_function<std::uint64_t>(
          "--locks", [&w](const std::uint64_t& n) { w.locks = n; },
          fmt::format("torture: number of locks, up to 16 (default {}; 0: the default)", experiment::kTortureLocks))
      ->transform(unsigned_in(0, 16));
  command->add_option("--long-hold-ns", w.long_hold_ns, "torture: length of the occasional long hold (at most 1 s)")
      ->transform(unsigned_in(0, 1000000000))
      ->default_str(std::to_string(defaults.long_hold_ns));
  command
      ->add_option_function<std::uint64_t>(
          "--long-hold-every", [&w](const std::uint64_t& n) { w.long_hold_every = n; },
          fmt::format("torture: one long hold per N acquisitions on average, up to 10^9 (default {}; 0: no long holds)",
                      experiment::kTortureLongHoldEvery))
      ->transform(unsigned_in(0, 1000000000));
  command->add_option("--wait-halt-delay-ns", w.wait_halt_delay_ns,
                      "Test knob: busy-wait between a PV wait's re-check and its halt, widening the lost-wake-up "
                      "window (guest only, at most 10 ms)")
      ->transform(unsigned_in(0, 10000000));
  command->add_option("--inject", options->inject,
                      "Inject preemptions (repeatable; docs/preemption.md): periodic:vcpu=N|all,every=DUR,for=DUR"
                      "[,phase=DUR][,count=N] | random:vcpu=N|all,rate=HZ,for=DUR[,seed=N][,count=N] | "
                      "holder|waiter:lock=N|any,every=N|p=P,for=DUR[,seed=N]");
  command->add_flag("--native", l.native, "Run the lock workload on host threads (no VM), pinned the same way");
  command->add_option("--param", options->params, "Extra workload parameter key=value (repeatable)");
  command->add_option("--json", options->json,
                      "Write the full report as JSON to FILE"
                      " (absent or a regular file, checked first; replaced atomically)");
  command->add_option("--api", options->api,
                      "Serve the control socket at SOCK while the VM runs (owner-only; see 'lockvisor ctl' and "
                      "docs/control-socket.md)");
  command->add_option("--trace", options->trace,
                      "Write the run's timeline as Chrome trace-event JSON to FILE (Perfetto, chrome://tracing;"
                      " docs/trace.md; absent or a regular file, replaced atomically)");
  command->add_option("--trace-max-events", options->trace_max_events,
                      "--trace: at most this many events (1000..10^9; later ones are counted as dropped)")
      ->transform(unsigned_in(1000, 1000000000))
      ->default_str(std::to_string(trace::TraceOptions{}.max_events));
  command->add_option("--trace-window", options->trace_window,
                      "--trace: write only all | START:END (e.g. 120ms:125ms since the start) | worst-wait[:PAD] "
                      "(the longest lock wait with PAD around it, default half the wait, at least 1ms)")
      ->default_str("all");
  command->add_option("--trace-merge-short", options->trace_merge_short,
                      "--trace: write back-to-back lock waits and holds shorter than DUR (e.g. 10us) as one "
                      "'acquisitions' slice each run of them (longer ones stay as they are)");
  options->machine.add_to(*command);
  command->add_option("--vm", options->vms,
                      "Run several VMs side by side, started and stopped together: key=value[,key=value...] over "
                      "run's long options plus label=NAME (repeatable; docs/multi-vm.md)");
  command->add_option("--hogs", options->hogs,
                      fmt::format("Host CPU hogs: N busy threads spread over --pcpus for the run, up to {}",
                                  multivm::kMaxHogs))
      ->transform(unsigned_in(0, multivm::kMaxHogs));
  // Hidden: the parent of a multi-VM run passes it (multivm/start_gate.h).
  command->add_option("--start-gate-fd", options->start_gate_fd)->group("")->check(CLI::Range(0, 1 << 20));
  options->command = command;
}

}  // namespace

Action add_run_command(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  add_run_options(app.add_subcommand("run", "Boot a guest running one workload and report per-vCPU statistics"), options);
  return [options] { return run(*options); };
}

CheckedRun check_run_arguments(std::vector<std::string> args) {
  CLI::App app;
  auto options = std::make_shared<RunOptions>();
  add_run_options(app.add_subcommand("run"), options);
  args.insert(args.begin(), "run");
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector last argument first
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    fail("{}", e.what());
  }
  auto& o = *options;
  o.lock.w.workload = o.workload;
  o.machine.finish();
  if (is_lock_workload(o.workload)) validate_lock_options(o);
  if (o.lock.native && !is_lock_workload(o.workload)) fail("--native runs lock workloads only");
  if (!o.machine.config.pcpus.empty()) host::validate_cpus(o.machine.config.pcpus);
  if (!o.vms.empty()) plan_vms(*o.command, o.vms);  // each VM's arguments, checked the same way
  auto config = o.machine.config;  // what run checks before it boots (vCPU count, memory, ...)
  inject_specs(o, config);
  config.program = o.workload;
  machine::validate_config(config);
  return {o.workload, is_lock_workload(o.workload) ? o.lock.w.lock : std::string(), config.vcpus, default_timeout(o),
          o.lock.native};
}

}  // namespace lockvisor::cli
