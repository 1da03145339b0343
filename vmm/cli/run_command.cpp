// lockvisor run: boot the guest with one workload (or, with --native, run a
// lock workload on host threads) and report what happened.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <new>
#include <optional>

#include "locks/registry.h"
#include "vmm/cli/commands.h"
#include "vmm/cli/linux_guest_run.h"
#include "vmm/cli/run_options.h"
#include "vmm/control/control_service.h"
#include "vmm/experiment/workload_settings.h"
#include "vmm/guest_image.h"
#include "vmm/host/cpu_set.h"
#include "vmm/host/emulation.h"
#include "vmm/inject/inject_spec.h"
#include "vmm/inject/injector.h"
#include "vmm/kvm/kvm_system.h"
#include "vmm/lockstat/lock_run.h"
#include "vmm/machine/machine.h"
#include "vmm/multivm/host_hogs.h"
#include "vmm/multivm/start_gate.h"
#include "vmm/native/native_env.h"
#include "vmm/native/native_runner.h"
#include "vmm/report/kvm_totals.h"
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

using experiment::is_lock_workload;

// The description both modes share; samples, vmm and host are filled by the caller.
lockstat::LockRun describe_lock_run(const RunOptions& o, const char* mode) {
  const auto& config = o.machine.config;
  lockstat::LockRun run;
  run.mode = mode;
  run.lock = o.lock.w.lock;
  run.workload = o.workload;
  run.cpus = config.vcpus;
  run.pcpus = host::format_cpu_list(config.pcpus);
  if (config.vnuma) run.vcpu_node = config.vnuma->vcpu_node;
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

// What --inject did to each thread: the text lines (as a VM's run prints
// them) and the JSON: per thread requests, parks slept through, time parked,
// and per kind the parks asked for (holder, waiter: of how many events, and
// the points the probe chose); and how far behind its schedule the injector
// thread was at the end.
nlohmann::json native_injected(const std::vector<inject::InjectSpec>& specs,
                                const std::vector<native::NativeThreadUsage>& usage, std::FILE* out) {
  bool has_kind[inject::kInjectKinds] = {};
  for (const auto& s : specs) has_kind[static_cast<unsigned>(s.kind)] = true;
  nlohmann::json threads = nlohmann::json::array();
  for (std::size_t i = 0; i < usage.size(); ++i) {
    if (!usage[i].injected) return nullptr;
    const auto& in = *usage[i].injected;
    if (i == 0) fmt::print(out, "injected preemptions (--inject), per thread and kind:\n");
    nlohmann::json kinds = nlohmann::json::object();
    std::string line;
    for (unsigned k = 0; k < inject::kInjectKinds; ++k) {
      if (!has_kind[k]) continue;
      const auto kind = static_cast<inject::InjectKind>(k);
      const auto& c = in.kinds[k];
      nlohmann::json j = {{"count", c.count}, {"ns", c.ns}};
      line += fmt::format("{}{} {}", line.empty() ? "" : ", ", inject::inject_kind_name(kind), c.count);
      if (kind == inject::InjectKind::kHolder || kind == inject::InjectKind::kWaiter) {
        j["events"] = c.events;
        j["points"] = c.points;
        line += fmt::format(" (of {} {})", c.events,
                            kind == inject::InjectKind::kHolder ? "acquisitions" : "first-waiter events");
      }
      kinds[inject::inject_kind_name(kind)] = std::move(j);
    }
    fmt::print(out, "  thread {}: {}; parked {} times, {:.1f} ms\n", i, line, in.park.parks,
               static_cast<double>(in.park.parked_ns) / 1e6);
    threads.push_back({{"thread", i},
                       {"requested", in.park.requested},
                       {"count", in.park.parks},
                       {"ns", in.park.parked_ns},
                       {"by_kind", std::move(kinds)}});
  }
  // Behind by more than a park's typical length: the periodic and random
  // counts above are short of what the schedules asked for.
  if (const double behind_ms = static_cast<double>(usage.front().injected->injector_behind_ns) / 1e6; behind_ms >= 1)
    fmt::print(out, "  the injector was {:.1f} ms behind its schedule at the end: its thread competes with the run's "
               "threads for CPUs, and the counts are what it sent\n", behind_ms);
  return {{"threads", std::move(threads)}, {"injector_behind_ns", usage.front().injected->injector_behind_ns}};
}

int run_native(RunOptions& o, std::vector<inject::InjectSpec> specs, const std::optional<OutputFile>& json) {
  auto& config = o.machine.config;
  const auto params = lock_params(o, config.vcpus);
  native::NativeRunConfig native_config{o.lock.w.lock, params, config.pcpus, config.pin == machine::PinPolicy::kSpread,
                                        {}, {}, std::move(specs), config.seed};
  // --vnuma: each thread pinned as its vCPU would be, on its node's CPUs,
  // and the locks read its node (native_runner.h).
  if (config.vnuma) {
    for (unsigned i = 0; i < config.vcpus; ++i)
      native_config.affinity.push_back(
          machine::vnuma_affinity(*config.vnuma, i, config.pin == machine::PinPolicy::kSpread));
    native_config.vcpu_node = config.vnuma->vcpu_node;
  }
  // Lock parameters (--param pvb_*=...) apply to host threads as in the guest.
  if (const char* bad = native::apply_lock_tuning(o.params)) fail("--param '{}': not a valid value for that key", bad);
  fmt::print("lockvisor run --native: {} {} on {} host threads, CPUs {} ({})\n", o.lock.w.lock, o.workload, config.vcpus,
             host::format_cpu_list(config.pcpus.empty() ? host::allowed_cpus() : config.pcpus),
             config.vnuma ? o.machine.pin + " within each node" : config.pcpus.empty() ? "unpinned" : o.machine.pin);
  if (config.vnuma)
    fmt::print("virtual NUMA: {} nodes, {} (threads@host CPUs{})\n", config.vnuma->nodes(),
               machine::format_vnuma(*config.vnuma),
               config.vnuma->shares_cpus() ? "; the nodes SHARE their host CPUs: a labelling of threads" : "");
  host::print_emulation_warning(stdout);
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
  if (!native_config.inject.empty()) extras["injected_preemptions"] = native_injected(native_config.inject, usage, stdout);
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
    report.run.wake = lockstat::check_wake(o.machine.config.pv_wake, stats, result);
    report.run.host = lockstat::host_info(kvm_kind);
    report.metrics = lockstat::to_json(report.run);
    report.metrics["kvm_totals"] = report::kvm_totals_json(result);
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
      if (resolved) {
        shown = trace::window_words(*resolved, timeline);
      } else if (!window_note.empty()) {
        shown = ", " + window_note;
      }
      out.line = fmt::format("trace: {} ({} MiB, {} events dropped{}; docs/trace.md)", file.path(),
                               (text.size() + (1u << 19)) >> 20, timeline.dropped_events(), shown);
      if (const std::string advice = trace::sizing_advice(timeline.metadata()); !advice.empty())
        out.line += "\n" + advice;
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

// vm.run() as a VM of a multi-VM run needs it, for either kind of guest:
// built, it waits at the start gate until every sibling is too; host hogs
// spin beside it while it runs. `extras` gets what the parent and the
// reader need: start_gate (when this VM was built, the common start time,
// when this guest first ran) and hogs.
machine::RunResult run_vm(machine::Machine& vm, const RunOptions& o, std::chrono::steady_clock::time_point origin,
                          nlohmann::json& extras) {
  extras = nlohmann::json::object();
  if (o.start_gate_fd >= 0) {
    const auto gate = multivm::wait_at_start_gate(o.start_gate_fd);
    extras["start_gate"] = {{"ready_monotonic_ns", gate.ready_ns}, {"start_monotonic_ns", gate.start_ns}};
  }
  std::optional<multivm::HostHogs> hogs;
  if (o.hogs > 0) hogs.emplace(o.hogs, o.machine.config.pcpus);
  auto result = vm.run();
  if (hogs) extras["hogs"] = hogs->stop();
  if (extras.contains("start_gate")) {
    // steady_clock is CLOCK_MONOTONIC here (libstdc++ on Linux): comparable
    // with the siblings' and the parent's clocks.
    const auto origin_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(origin.time_since_epoch()).count();
    extras["start_gate"]["first_entry_monotonic_ns"] =
        static_cast<std::int64_t>(origin_ns + result.seconds_to_first_entry * 1e9);
  }
  return result;
}

// How each kind of guest's run ends differently; finish_vm_run() does the rest.
struct RunEnding {
  // The --json document, built only when --json was given; an Error it
  // throws counts as a --json that could not be written.
  std::function<nlohmann::json()> json_document;
  // What only this kind of guest reports, printed after the run table.
  std::function<void()> print_summary;
  // The outcome line's name: the machine's outcome, or what the guest's own
  // console says ended it (a Linux kernel's panic).
  std::string outcome_name;
  bool first_exit = true;  // the times line gives the first exit's too
};

// The end every VM run shares, once its exit code is decided: the --json
// and --trace files written (a failure changes the exit code), then the
// outcome line with its details, the times, the run table, the hogs, the
// guest's summary and the trace's line. A --json that could not be written
// is rethrown last, once everything is printed (main() prints it: one line,
// the same exit code). Returns the exit code.
int finish_vm_run(const RunOptions& o, const machine::RunResult& result, int code, const RunEnding& ending,
                  const std::optional<OutputFile>& json, std::optional<trace::Trace>& timeline,
                  std::optional<OutputFile>& trace_file, const trace::TraceWindowSpec& window,
                  const nlohmann::json& extras) {
  std::exception_ptr json_error;
  if (json) {
    try {
      report::write_json_file(*json, ending.json_document());
    } catch (const Error& e) {
      json_error = std::current_exception();
      code = exit_code_of(e.kind());
    }
  }
  TraceOutcome traced;
  if (timeline) traced = write_trace_file(o, *timeline, *trace_file, window, result.outcome, code);
  fmt::print("outcome: {}{}{} (exit code {}): {}\n", ending.outcome_name,
             json_error ? ", --json not written" : "", traced.error ? ", --trace not written" : "", code, result.reason);
  for (const auto& line : result.details) fmt::print("  {}\n", line);
  fmt::print("wall {:.3f} s, first guest entry after {:.1f} ms{}\n", result.wall_seconds,
             result.seconds_to_first_entry * 1e3,
             ending.first_exit ? fmt::format(", first exit after {:.1f} ms", result.seconds_to_first_exit * 1e3) : "");
  report::print_run_table(result, stdout);
  if (extras.contains("hogs")) fmt::print("{}\n", multivm::hogs_line(extras["hogs"]));
  ending.print_summary();
  if (!traced.line.empty()) fmt::print("{}\n", traced.line);
  if (traced.error) {
    // OutputFile's errors name the option and the file already: say them once.
    const std::string named = fmt::format("--trace {}: ", o.trace);
    const std::string& why = *traced.error;
    fmt::print(stderr, "lockvisor: {}not written: {}\n", named,
               why.starts_with(named) ? why.substr(named.size()) : why);
  }
  if (json_error) std::rethrow_exception(json_error);
  return code;
}

int run_linux(RunOptions& o, CheckedOptions& checked, const std::optional<OutputFile>& json,
              std::optional<OutputFile>& trace_file) {
  auto& config = o.machine.config;
  const LinuxOptions& lx = o.linux_guest;
  auto& specs = checked.specs;
  const auto& window = checked.window;
  const std::uint64_t merge_short_ns = checked.merge_short_ns;
  // Time zero before the kernel is read: the guest's time to init then
  // counts everything lockvisor does, as a peer VMM's would.
  const auto origin = std::chrono::steady_clock::now();
  PreparedLinuxGuest guest(lx, config);
  std::unique_ptr<control::ControlService> api;
  if (!o.api.empty()) api = std::make_unique<control::ControlService>(o.api);
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
  host::print_emulation_warning(stdout);
  std::fflush(stdout);
  nlohmann::json extras;
  auto result = run_vm(vm, o, origin, extras);
  const auto crash = take_kernel_end(result);
  const auto report = guest.init_report();
  const auto spinlock = guest.kernel_spinlock(report);
  int code = machine::exit_code(result.outcome);
  if (code == 0) code = linux_exit_code(guest, report, result);
  const RunEnding ending{
      [&] {
        auto doc = linux_report_json(guest, report, spinlock, result, crash, report::run_to_json(result, config),
                                     kvm_kind, origin);
        doc.update(extras);
        return doc;
      },
      [&] { print_linux_summary(guest, report, spinlock, result, origin); },
      linux_outcome_name(result, crash),
      false};
  return finish_vm_run(o, result, code, ending, json, timeline, trace_file, window, extras);
}

int run(RunOptions& o) {
  if (!o.vms.empty()) return run_multi_vm(*o.command, o.vms, o.hogs, o.json);
  auto checked = validate_run(o);
  auto& config = o.machine.config;
  auto& specs = checked.specs;
  const auto& args = checked.args;
  // Checked now, not after a run that may have taken minutes: a --json that
  // cannot be written is a bad command line (exit 2) before anything boots.
  std::optional<OutputFile> json;
  if (!o.json.empty()) json.emplace(o.json, "--json");
  if (o.lock.native) return run_native(o, std::move(specs), json);
  std::optional<OutputFile> trace_file;
  if (!o.trace.empty()) trace_file.emplace(o.trace, "--trace");
  if (checked.linux_guest) return run_linux(o, checked, json, trace_file);
  const auto& window = checked.window;
  const std::uint64_t merge_short_ns = checked.merge_short_ns;
  std::vector<std::byte> storage;
  const auto image = select_guest_image(o.machine.image, storage);
  // Without --memory the guest gets the default, or the least that holds the
  // image and every vCPU's stack block when that is more (hundreds of vCPUs):
  // a vCPU count KVM allows is not refused for a size nobody asked for. An
  // explicit --memory too small is still refused.
  if (o.command->count("--memory") == 0)
    config.memory_mib = std::max(config.memory_mib, machine::minimum_memory_mib(config.vcpus, image));
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
  host::print_emulation_warning(stdout);
  if (config.vnuma)
    fmt::print("virtual NUMA: {} nodes, {} (vCPUs@host CPUs{}); remote handoff cost: {}\n", config.vnuma->nodes(),
               machine::format_vnuma(*config.vnuma),
               config.vnuma->shares_cpus() ? "; the nodes SHARE their host CPUs: a labelling of vCPUs, no host locality"
                                           : "",
               config.vnuma_remote_ns != 0 ? fmt::format("MODELLED, {} ns busy-wait per remote acquisition",
                                                         config.vnuma_remote_ns)
                                           : std::string("none (virtual nodes only)"));
  std::fflush(stdout);
  nlohmann::json extras;
  auto result = run_vm(vm, o, origin, extras);
  // Everything that decides the exit code happens before the outcome line is
  // printed: lock statistics (missing ones are a guest fault, a violation a
  // failure) and the JSON file (if writing it fails, the line says so).
  std::optional<GuestLockReport> lock_report;
  if (is_lock_workload(o.workload) && result.outcome == machine::Outcome::kCompleted)
    lock_report = guest_lock_report(o, result, kvm_kind);
  // pingpong's rate comes from a guest-reported time: unusable is exit 3.
  std::optional<report::PingpongRate> pingpong;
  if (o.workload == "pingpong") pingpong = report::pingpong_rate(result, o.rounds);
  const int code = machine::exit_code(result.outcome);
  const RunEnding ending{
      [&] {
        auto run_json = report::run_to_json(result, config);
        if (!lock_report) {
          run_json.update(extras);
          return run_json;
        }
        lock_report->metrics["settings"] = run_json["settings"];  // report/settings_json.h
        lock_report->metrics["vm"] = std::move(run_json);
        lock_report->metrics.update(extras);
        return lock_report->metrics;
      },
      [&] {
        if (pingpong)
          fmt::print("pingpong: {} hand-offs in {:.3f} s (guest clock): {:.1f} us per hand-off\n", pingpong->handoffs,
                     pingpong->seconds, pingpong->us_per_handoff);
        if (lock_report) lockstat::print_summary(lock_report->run, lock_report->metrics, stdout);
      },
      std::string(machine::outcome_name(result.outcome))};
  return finish_vm_run(o, result, code, ending, json, timeline, trace_file, window, extras);
}

}  // namespace

Action add_run_command(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  add_run_options(app.add_subcommand("run", "Boot a guest running one workload and report per-vCPU statistics"), options);
  return [options] { return run(*options); };
}

}  // namespace lockvisor::cli
