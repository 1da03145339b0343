// The command line of `lockvisor run`: options and validation (run_options.h).
#include "vmm/cli/run_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>
#include <vector>

#include "locks/pvbounded_tuning.h"
#include "vmm/cli/commands.h"
#include "vmm/cli/option_checks.h"
#include "vmm/cli/setting_options.h"
#include "vmm/experiment/lock_name.h"
#include "vmm/experiment/run_settings.h"
#include "vmm/host/cpu_set.h"
#include "vmm/inject/injector.h"
#include "vmm/inject/inject_spec.h"
#include "vmm/linuxboot/linux_boot_plan.h"
#include "vmm/machine/linux_cpuid.h"
#include "vmm/machine/machine.h"
#include "vmm/util/error.h"
#include "vmm/util/file_identity.h"

namespace lockvisor::cli {

using experiment::is_lock_workload;

abi::WorkloadParams lock_params(const RunOptions& o, unsigned cpus) {
  return experiment::workload_params(o.lock.w, o.machine.config.seed, cpus);
}

namespace {

// --inject: parsed, checked against the VM (a native run's threads are its
// vCPUs), and recorded in the config (the report's settings and the guest's
// BootInfo::lock_probe).
std::vector<inject::InjectSpec> inject_specs(const RunOptions& o, machine::MachineConfig& config) {
  std::vector<inject::InjectSpec> specs;
  for (const auto& value : o.inject)
    for (auto& s : inject::parse_inject_specs(value)) specs.push_back(std::move(s));
  if (specs.empty()) return specs;
  inject::validate_inject_specs(specs, config.vcpus);
  for (const auto& s : specs) {
    if (s.targeted() && (!is_lock_workload(o.workload) || o.workload == "uncontended"))
      fail("--inject '{}': targeted schedules need a contended lock workload (lockbench, torture; {})",
           inject::format_inject_spec(s),
           is_lock_workload(o.workload) ? o.workload + " has no contention to target" : o.workload + " takes no lock");
    config.inject.push_back(inject::format_inject_spec(s));
  }
  config.lock_probe = inject::lock_probe_config(specs, config.seed);
  return specs;
}


void validate_lock_options(const RunOptions& o) {
  experiment::validate(o.lock.w);
  const locks::LockInfo& lock = experiment::known_lock(o.lock.w.lock);
  if (lock.needs_pv && o.machine.no_pv && !o.lock.native)
    fail("--lock {} needs KVM_FEATURE_PV_UNHALT, which --no-pv hides (use --lock auto to follow the KVM guest's policy)",
         o.lock.w.lock);
}

// A lock workload's watchdog without --timeout: room past its --duration.
double lock_watchdog_s(const RunOptions& o) { return o.lock.w.duration_s * 10 + 60; }

// The watchdog: --timeout, or for a lock workload room past its --duration.
double default_timeout(const RunOptions& o) {
  const double given = o.machine.config.timeout_s;
  if (given != 0 || !is_lock_workload(o.workload)) return given;
  return lock_watchdog_s(o);
}

// --param key=value: passes keys that have no option of their own. A key
// that has one is refused: the guest takes the first occurrence of a key, so
// the --param would silently override the validated option while the report
// showed the option's value. A lock parameter (pvb_*) is checked here
// against the rows the guest checks it with, with the guest's words.
//
// Other keys pass through to the guest's arguments (a note= reaches the
// report), except what cannot be what was meant: an empty key, a key given
// twice, a lock parameter that this run's lock does not read, and a key
// that looks like one (a lock parameter's prefix, pvb_, cna_...) but is none,
// the typo that would otherwise run the default silently.
std::string checked_params(const RunOptions& o) {
  std::string explicit_params;
  std::vector<std::string> keys;
  for (const auto& p : o.params) {
    if (p.find('=') == std::string::npos || p.find(' ') != std::string::npos)
      fail("--param '{}': expected key=value without spaces", p);
    const auto key = p.substr(0, p.find('='));
    if (key.empty()) fail("--param '{}': the key is empty", p);
    if (std::find(keys.begin(), keys.end(), key) != keys.end())
      fail("--param '{}': {} is given twice (the guest would take the first)", p, key);
    keys.push_back(key);
    if (const char* option = experiment::option_for_guest_key(key))
      fail("--param '{}': '{}' has its own option, {}; use that", p, key, option);
    const auto* k = locks::pvb::find_tuning_key(key.data(), key.size());
    if (k == nullptr) {
      std::string known;
      bool looks_like_one = false;
      for (const auto& each : locks::pvb::kTuningKeys) {
        const std::string_view name = each.key;
        looks_like_one = looks_like_one || key.starts_with(name.substr(0, name.find('_') + 1));
        known += (known.empty() ? "" : ", ") + std::string(name);
      }
      if (looks_like_one) fail("--param '{}': no lock reads {} (lock parameters: {})", p, key, known);
    }
    if (k != nullptr) {
      std::uint64_t value = 0;
      switch (locks::pvb::check_tuning_value(*k, p.c_str() + key.size() + 1, &value)) {
        case locks::pvb::TuningCheck::kNotAValue: {
          char accepted[160];
          locks::pvb::describe_accepted(*k, accepted, sizeof accepted);
          fail("--param '{}': {} is not a valid value ({})", p, p, accepted);
        }
        case locks::pvb::TuningCheck::kOutOfRange:
          fail("--param '{}': {}={} is out of range {}..{}", p, key, value, k->min, k->max);
        case locks::pvb::TuningCheck::kValid: break;
      }
      if (!is_lock_workload(o.workload))
        fail("--param '{}': a lock parameter, and this run's workload, {}, takes no lock", p, o.workload);
      if (!locks::pvb::tuning_key_used_by(*k, o.lock.w.lock.c_str())) {
        std::string readers = k->used_by;
        for (std::size_t at = readers.find(' '); at != std::string::npos; at = readers.find(' ', at + 2))
          readers.replace(at, 1, ", ");
        fail("--param '{}': only {} read {}, and this run's lock is {}", p, readers, key, o.lock.w.lock);
      }
    }
    explicit_params += p + ' ';
  }
  return explicit_params;
}

}  // namespace

namespace {

// The timeline's options, for either kind of guest: parsed into `c`, and
// refused without --trace (they would shape a file nobody writes).
void check_trace_options(const RunOptions& o, CheckedOptions& c) {
  const bool tracing = !o.trace.empty();
  c.window = trace::parse_trace_window(o.trace_window);
  if (!o.trace_merge_short.empty()) {
    if (!tracing) fail("--trace-merge-short '{}': needs --trace FILE", o.trace_merge_short);
    c.merge_short_ns = trace::parse_trace_duration("--trace-merge-short", o.trace_merge_short);
  }
  if (c.window.kind != trace::TraceWindowSpec::Kind::kAll && !tracing)
    fail("--trace-window '{}': needs --trace FILE", o.trace_window);
  if (o.command->count("--trace-max-events") > 0 && !tracing)
    fail("--trace-max-events {}: needs --trace FILE", o.trace_max_events);
}

// The freestanding guest's workloads, and the Linux guest's (--kernel): one
// row of choices holds both, the guest kind decides which apply.
bool is_freestanding_workload(const std::string& w) {
  static constexpr const char* kNames[] = {"pingpong", "lockbench", "uncontended", "torture", "hello", "empty"};
  return std::any_of(std::begin(kNames), std::end(kNames), [&w](const char* n) { return w == n; });
}

// --kernel: what a Linux guest can and cannot be given (docs/linux-guests.md).
CheckedOptions validate_linux_run(RunOptions& o) {
  auto& config = o.machine.config;
  // First, bad input: the MADT and the MP table name 8-bit xAPIC ids only
  // (no x2APIC entries). Then, before any file is read: PVM runs no ordinary kernel.
  if (config.vcpus > linuxboot::kMaxVcpus)
    fail("--vcpus {}: a Linux guest has at most {} (its ACPI tables name 8-bit xAPIC ids only)", config.vcpus,
         linuxboot::kMaxVcpus);
  if (o.host_checks) machine::refuse_linux_on_pvm();
  const CLI::App& cmd = *o.command;
  if (o.lock.native) fail("--kernel: not with --native (a kernel needs a VM)");
  if (config.vnuma) fail("--vnuma: a Linux guest is not told the topology (lockvisor writes no SRAT); not with --kernel");
  if (!o.params.empty()) fail("--param: the freestanding guest's parameters; a Linux guest takes --append");
  if (config.pv_wake != abi::PvWake::kHypercall)
    fail("--pv-wake {}: not with --kernel (the kernel's PV spinlock chooses its own wake-up: the KICK_CPU hypercall)",
         abi::pv_wake_name(config.pv_wake));
  // A kernel with one CPU keeps its native queued spinlock whatever CPUID
  // offers (kvm_spinlock_init checks the CPU count before PV_UNHALT), so a
  // one-vCPU point asking for pv or tas would silently measure native.
  if (cmd.count("--guest-lock") > 0 && config.vcpus == 1) {
    const auto asked = machine::parse_guest_lock(o.linux_guest.guest_lock);
    if (asked && *asked != machine::GuestLockPolicy::kNative)
      fail("--guest-lock {}: needs --vcpus 2 or more (a kernel with one CPU keeps its native spinlock: "
           "\"PV spinlocks disabled, single CPU\")",
           o.linux_guest.guest_lock);
  }
  if (cmd.count("--backend") > 0 && config.backend_kind != pvlock::BackendKind::kKvm)
    fail("--kernel: a Linux guest uses KVM's in-kernel PV lock hypercalls (--backend kvm)");
  config.backend_kind = pvlock::BackendKind::kKvm;
  if (cmd.count("--workload") == 0) o.workload = "hello";
  if (!is_linux_workload(o.workload))
    fail("--workload {}: with --kernel, one of {}", o.workload, fmt::join(linux_workloads(), ", "));
  if (cmd.count("--memory") == 0) config.memory_mib = kLinuxDefaultMemoryMib;
  auto& lx = o.linux_guest;
  lx.workload = o.workload;
  lx.duration_ms = static_cast<std::uint64_t>(o.lock.w.duration_s * 1000 + 0.5);
  lx.kvmclock = o.kvmclock != "off";
  // A kernel that never reaches its init must still end: boot (minutes in
  // the emulated nested machine) plus the workload.
  if (config.timeout_s == 0) config.timeout_s = kLinuxBootAllowanceS + 2 * o.lock.w.duration_s;
  CheckedOptions c;
  c.linux_guest = true;
  for (const auto& value : o.inject)
    for (auto& s : inject::parse_inject_specs(value)) {
      if (s.targeted())
        fail("--inject '{}': holder and waiter schedules need the guest's lock log, which a Linux guest has not; "
             "use periodic or random", inject::format_inject_spec(s));
      c.specs.push_back(std::move(s));
    }
  if (!c.specs.empty()) {
    inject::validate_inject_specs(c.specs, config.vcpus);
    for (const auto& s : c.specs) config.inject.push_back(inject::format_inject_spec(s));
  }
  check_trace_options(o, c);
  if (c.window.kind == trace::TraceWindowSpec::Kind::kWorstWait)
    fail("--trace-window worst-wait: needs the guest's lock log, which a Linux guest has not");
  if (!config.pcpus.empty()) host::validate_cpus(config.pcpus);
  config.program = "linux";
  machine::validate_config(config);
  return c;
}

}  // namespace

CheckedOptions validate_run(RunOptions& o) {
  // Host threads run lock workloads only, so there the default is the lock benchmark.
  if (o.lock.native && o.command->count("--workload") == 0) o.workload = "lockbench";
  o.lock.w.workload = o.workload;
  o.machine.finish();
  auto& config = o.machine.config;
  // Each output its own file: two writers of one file would lose one output.
  refuse_shared_files({{"--json", o.json}, {"--trace", o.trace}, {"--serial", config.serial_path}, {"--api", o.api}});
  for (const char* linux_only : {"--initrd", "--append", "--guest-lock", "--kvmclock"})
    if (o.command->count(linux_only) > 0 && o.linux_guest.kernel.empty()) fail("{}: needs --kernel FILE", linux_only);
  if (!o.linux_guest.kernel.empty()) return validate_linux_run(o);
  if (!is_freestanding_workload(o.workload))
    fail("--workload {}: a workload of the Linux guest's init; it needs --kernel FILE", o.workload);
  if (is_lock_workload(o.workload)) validate_lock_options(o);
  CheckedOptions c;
  c.specs = inject_specs(o, config);
  check_trace_options(o, c);
  const bool tracing = !o.trace.empty();
  if (c.window.kind == trace::TraceWindowSpec::Kind::kWorstWait && !is_lock_workload(o.workload))
    fail("--trace-window worst-wait: needs a lock workload (lockbench, uncontended, torture)");
  if (o.lock.native) {
    if (tracing) fail("--trace: not with --native (the timeline is the VM's)");
    if (!is_lock_workload(o.workload)) fail("--native runs lock workloads only (lockbench, uncontended, torture)");
    if (o.start_gate_fd >= 0) fail("--start-gate-fd starts VMs; --native runs none");
    if (!o.api.empty()) fail("--api drives a VM; --native runs no VM");
    if (config.vnuma_remote_ns != 0)
      fail("--vnuma-remote-ns {}: the modelled cost is the guest's; --native runs host threads",
           config.vnuma_remote_ns);
  }
  for (const auto& setting : experiment::run_settings()) {
    const CLI::Option* given = o.command->get_option_no_throw(setting.flag);
    if (given == nullptr || given->count() == 0) continue;
    const auto& values = given->results();
    const std::string value = values.size() == 1 ? values.front() : std::string();
    if (const auto why = experiment::ignored_by(setting, value, o.workload, o.lock.native); !why.empty())
      fail("{}", why);
  }
  if (is_lock_workload(o.workload) && o.command->count("--timeout") > 0 && o.command->count("--iterations") == 0 &&
      config.timeout_s != 0 && config.timeout_s <= o.lock.w.duration_s)
    fail("--timeout {}: not longer than --duration {}: the watchdog would stop every run before its measured window "
         "ends (without --timeout a lock workload gets {} s)",
         config.timeout_s, o.lock.w.duration_s, lock_watchdog_s(o));
  const std::string explicit_params = checked_params(o);
  if (!config.pcpus.empty()) host::validate_cpus(config.pcpus);
  config.program = o.workload;
  if (o.lock.native) {
    // The VM-wide checks hold for host threads too (1..128 of them, ...).
    machine::validate_config(config);
    return c;
  }
  if (is_lock_workload(o.workload)) {
    // The guest reads the binary record (BootInfo::workload); args is only
    // the readable description run prints.
    config.workload = lock_params(o, config.vcpus);
    c.args = experiment::guest_args(o.lock.w, *config.workload);
    config.timeout_s = default_timeout(o);
  } else {
    if (o.rounds > 0) c.args += fmt::format("rounds={} ", o.rounds);
    if (o.spin > 0) c.args += fmt::format("spin={} ", o.spin);
    if (o.halt != "hypercall") c.args += fmt::format("halt={} ", o.halt);
  }
  c.args = explicit_params + c.args;
  while (!c.args.empty() && c.args.back() == ' ') c.args.pop_back();
  config.args = c.args;
  machine::validate_config(config);
  if (o.host_checks) machine::refuse_what_pvm_cannot_run(config);
  return c;
}


void add_run_options(CLI::App* command, const std::shared_ptr<RunOptions>& options) {
  // Every option is a row of vmm/experiment/run_settings.cpp: flag, help,
  // range (checked on the text: CLI11 alone would turn "-1" into 2^64 - 1)
  // and default come from there.
  add_setting(*command, "workload", options->workload);
  auto& lx = options->linux_guest;
  add_setting(*command, "kernel", lx.kernel);
  add_setting(*command, "initrd", lx.initrd);
  add_setting(*command, "append", lx.append);
  add_setting(*command, "guest_lock", lx.guest_lock);
  add_setting(*command, "kvmclock", options->kvmclock);
  add_setting(*command, "rounds", options->rounds);
  add_setting(*command, "spin", options->spin);
  add_setting(*command, "halt", options->halt);
  auto& l = options->lock;
  auto& w = l.w;
  add_setting(*command, "lock", w.lock);
  add_setting(*command, "cs_ns", w.cs_ns);
  add_setting(*command, "cs_lines", w.cs_lines);
  add_setting(*command, "delay_ns", w.delay_ns);
  auto* duration = add_setting(*command, "duration_s", w.duration_s);
  add_setting(*command, "iterations", w.iterations)->excludes(duration);
  add_setting(*command, "layout", w.layout);
  // Their defaults depend on the workload, so the rows show none: the help
  // names torture's.
  const auto torture_default = [](std::uint64_t n, const char* zero) {
    return fmt::format(" (default {}; 0: {})", n, zero);
  };
  add_setting_function<std::uint64_t>(*command, "locks", [&w](const std::uint64_t& n) { w.locks = n; },
                                      torture_default(experiment::kTortureLocks, "the default"));
  add_setting(*command, "long_hold_ns", w.long_hold_ns);
  add_setting_function<std::uint64_t>(*command, "long_hold_every",
                                      [&w](const std::uint64_t& n) { w.long_hold_every = n; },
                                      torture_default(experiment::kTortureLongHoldEvery, "no long holds"));
  add_setting(*command, "wait_halt_delay_ns", w.wait_halt_delay_ns);
  add_setting(*command, "inject", options->inject);
  add_setting(*command, "native", l.native);
  add_setting(*command, "param", options->params);
  add_setting(*command, "json", options->json);
  add_setting(*command, "api", options->api);
  add_setting(*command, "trace", options->trace);
  add_setting(*command, "trace_max_events", options->trace_max_events);
  add_setting(*command, "trace_window", options->trace_window);
  add_setting(*command, "trace_merge_short", options->trace_merge_short);
  options->machine.add_to(*command);
  add_setting(*command, "vm", options->vms);
  add_setting(*command, "hogs", options->hogs);
  // Hidden: the parent of a multi-VM run passes it (multivm/start_gate.h).
  add_setting(*command, "start_gate_fd", options->start_gate_fd)->group("");
  options->command = command;
}


CheckedRun check_run_arguments(std::vector<std::string> args, bool host_checks) {
  CLI::App app;
  auto options = std::make_shared<RunOptions>();
  options->host_checks = host_checks;
  add_run_options(app.add_subcommand("run"), options);
  args.insert(args.begin(), "run");
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector last argument first
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    fail("{}", e.what());
  }
  refuse_empty_values(app);
  auto& o = *options;
  if (!o.vms.empty()) {
    plan_vms(*o.command, o.vms, o.host_checks);  // each VM's arguments, checked by validate_run
  } else {
    validate_run(o);
  }
  const auto& config = o.machine.config;
  return {o.workload, is_lock_workload(o.workload) ? o.lock.w.lock : std::string(), config.vcpus, default_timeout(o),
          o.lock.native};
}
}  // namespace lockvisor::cli
