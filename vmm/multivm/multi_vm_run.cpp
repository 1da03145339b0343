#include "vmm/multivm/multi_vm_run.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "vmm/machine/run_result.h"
#include "vmm/machine/stop_signals.h"
#include "vmm/multivm/host_hogs.h"
#include "vmm/multivm/start_gate.h"
#include "vmm/util/child_process.h"
#include "vmm/util/error.h"
#include "vmm/util/scratch_dir.h"

namespace lockvisor::multivm {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

// Room past the longest child watchdog before the parent calls it hung.
constexpr double kRunMarginS = 30;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string last_line(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t") != std::string::npos) last = line;
  return last;
}

// One VM while it runs.
struct Running {
  const VmPlan* plan;
  GateChannel gate;
  fs::path json, log;
  std::optional<ChildProcess> child;
  bool ready = false;
  std::optional<int> exit_code;
  std::string stopped_by;
};

// The run JSON of a child: a lock workload nests it under "vm".
const nlohmann::json* run_json_of(const nlohmann::json& result) {
  if (!result.is_object()) return nullptr;
  if (result.contains("vm") && result["vm"].is_object()) return &result["vm"];
  return &result;
}

}  // namespace

MultiRunResult run_vms(const MultiRunOptions& o) {
  machine::wait_for_children_on_stop();
  ScratchDir scratch("lockvisor-vms", "the VMs' reports");
  std::vector<Running> vms;
  vms.reserve(o.vms.size());
  double longest_watchdog = 0;
  for (std::size_t i = 0; i < o.vms.size(); ++i) {
    const auto& plan = o.vms[i];
    auto& vm = vms.emplace_back(Running{&plan, make_gate_channel(), scratch.path() / fmt::format("vm{}.json", i),
                                        scratch.path() / fmt::format("vm{}.log", i), std::nullopt, false,
                                        std::nullopt, std::string()});
    std::vector<std::string> argv = {o.lockvisor, "run"};
    argv.insert(argv.end(), plan.args.begin(), plan.args.end());
    argv.insert(argv.end(), {"--json", vm.json.string(), "--start-gate-fd", std::to_string(vm.gate.child.get())});
    vm.child.emplace(argv, vm.log.string(), std::vector<int>{vm.gate.child.get()});
    vm.gate.child.reset();  // the child has its copy; EOF on ours now means it has gone
    longest_watchdog = std::max(longest_watchdog, plan.timeout_s);
  }

  MultiRunResult out;
  std::optional<HostHogs> hogs;
  bool gate_open = false, stopping = false;
  bool interrupted = false, timed_out = false;
  auto stop_at = Clock::now();
  const auto build_deadline = Clock::now() + kGateWait;
  auto run_deadline = Clock::time_point::max();
  auto stop_all = [&](const std::string& why, const Running* except) {
    if (stopping) return;
    stopping = true;
    stop_at = Clock::now();
    for (auto& vm : vms)
      if (&vm != except && !vm.exit_code) {
        vm.stopped_by = why;
        vm.child->signal(SIGTERM);
      }
  };
  while (true) {
    bool all_ended = true, all_ready = true;
    for (auto& vm : vms) {
      if (!vm.exit_code) vm.exit_code = vm.child->poll();
      if (!vm.exit_code) all_ended = false;
      if (!vm.ready && !vm.exit_code) {
        pollfd p{vm.gate.parent.get(), POLLIN, 0};
        char byte = 0;
        // A byte 'R': built. End of file: it has gone (its exit code follows).
        if (::poll(&p, 1, 0) > 0 && ::read(vm.gate.parent.get(), &byte, 1) == 1 && byte == kReadyByte) vm.ready = true;
      }
      all_ready = all_ready && vm.ready;
      // A VM that ends before the gate opens, or with a non-zero exit code,
      // has failed: the others are stopped.
      if (vm.exit_code && vm.stopped_by.empty() && !stopping && (!gate_open || *vm.exit_code != 0)) {
        out.failure = fmt::format("VM '{}' failed: {}{}", vm.plan->label, machine::outcome_for_exit_code(*vm.exit_code),
                                  gate_open ? "" : " before the start gate opened");
        stop_all(fmt::format("stopped because VM '{}' failed", vm.plan->label), &vm);
      }
    }
    if (all_ended) break;
    const auto now = Clock::now();
    if (!stopping && machine::stop_signal() != 0) {
      interrupted = true;
      out.failure = fmt::format("stopped by {}", machine::signal_name(machine::stop_signal()));
      stop_all(out.failure, nullptr);
    }
    if (!stopping && !gate_open && all_ready) {
      // Everything slow is done: open the gate for all at once, then start
      // the hogs (they compete with the guests, not with the builds).
      out.gate_opened_ns = monotonic_ns() + std::chrono::nanoseconds(kStartLead).count();
      for (auto& vm : vms)
        if (!open_start_gate(vm.gate.parent.get(), out.gate_opened_ns)) {
          // It went away between "ready" and now; its exit code says why.
        }
      gate_open = true;
      run_deadline = now + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(longest_watchdog + kRunMarginS));
      if (o.hogs > 0) hogs.emplace(o.hogs, o.hog_cpus);
    }
    if (!stopping && !gate_open && now > build_deadline) {
      timed_out = true;
      out.failure = fmt::format("timeout: the VMs were not all built within {} s", kGateWait.count());
      stop_all("timeout (build)", nullptr);
    }
    if (!stopping && gate_open && now > run_deadline) {
      timed_out = true;
      out.failure = fmt::format("timeout: a VM still ran {:.0f} s after its watchdog should have ended it",
                                kRunMarginS);
      stop_all("timeout (hung)", nullptr);
    }
    // A child may take kChildStopGrace to end after SIGTERM before it is
    // killed: past its own backstop, below this process's own
    // (kParentStopGrace), so that the parent still reports every VM.
    if (stopping && now - stop_at > machine::StopSignals::kChildStopGrace)
      for (auto& vm : vms)
        if (!vm.exit_code) {
          vm.exit_code = vm.child->kill_and_reap();
          vm.stopped_by += fmt::format("; killed after {} s without ending", machine::StopSignals::kChildStopGrace.count());
        }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (hogs) out.hogs = hogs->stop();

  std::vector<std::int64_t> entries;
  int worst = 0;
  for (auto& vm : vms) {
    VmResult r;
    r.plan = vm.plan;
    r.label = vm.plan->label;
    r.spec = vm.plan->spec;
    r.exit_code = *vm.exit_code;
    r.outcome = machine::outcome_for_exit_code(r.exit_code);
    r.stopped_by = vm.stopped_by;
    r.log = read_text(vm.log);
    std::ifstream in(vm.json);
    if (in) {
      try {
        r.result = nlohmann::json::parse(in);
      } catch (const nlohmann::json::exception&) {
        r.result = nullptr;
      }
    }
    const auto* run = run_json_of(r.result);
    if (run && run->contains("reason") && (*run)["reason"].is_string()) r.reason = (*run)["reason"].get<std::string>();
    if (r.reason.empty()) r.reason = last_line(r.log);
    if (r.result.is_object() && r.result.contains("start_gate")) {
      const auto& g = r.result["start_gate"];
      if (g.contains("first_entry_monotonic_ns") && g["first_entry_monotonic_ns"].is_number_integer()) {
        r.first_entry_ns = g["first_entry_monotonic_ns"].get<std::int64_t>();
        entries.push_back(*r.first_entry_ns);
      }
    }
    // The exit code (docs/multi-vm.md): the highest of the VMs that ended on
    // their own; one the parent stopped because a sibling failed does not
    // count (its "interrupted" is a consequence, not a cause).
    if (vm.stopped_by.empty()) worst = std::max(worst, r.exit_code);
    out.vms.push_back(std::move(r));
  }
  if (timed_out) worst = std::max(worst, machine::exit_code(machine::Outcome::kTimeout));
  if (!out.failure.empty() && worst == 0) worst = machine::exit_code(machine::Outcome::kHostError);
  if (interrupted) worst = machine::exit_code(machine::Outcome::kInterrupted);
  out.exit_code = worst;
  if (entries.size() == vms.size() && !entries.empty()) {
    const auto [lo, hi] = std::minmax_element(entries.begin(), entries.end());
    out.start_skew_ms = static_cast<double>(*hi - *lo) * 1e-6;
  }
  return out;
}

nlohmann::json to_json(const MultiRunResult& r) {
  auto vms = nlohmann::json::array();
  for (const auto& vm : r.vms)
    vms.push_back({{"label", vm.label},
                   {"spec", vm.spec},
                   {"workload", vm.plan->workload},
                   {"lock", vm.plan->lock},
                   {"vcpus", vm.plan->vcpus},
                   {"exit_code", vm.exit_code},
                   {"outcome", vm.outcome},
                   {"stopped_by", vm.stopped_by.empty() ? nlohmann::json(nullptr) : nlohmann::json(vm.stopped_by)},
                   {"reason", vm.reason},
                   {"result", vm.result}});
  return {{"vms", vms},
          {"hogs", r.hogs},
          {"failure", r.failure.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.failure)},
          {"start_skew_ms", r.start_skew_ms ? nlohmann::json(*r.start_skew_ms) : nlohmann::json(nullptr)},
          {"exit_code", r.exit_code}};
}

namespace {

std::string number_at(const nlohmann::json& j, const char* pointer, const char* format, double scale = 1) {
  const nlohmann::json::json_pointer p(pointer);
  if (!j.is_object() || !j.contains(p) || !j.at(p).is_number()) return "-";
  return fmt::format(fmt::runtime(format), j.at(p).get<double>() * scale);
}

}  // namespace

void print_report(const MultiRunResult& r, std::FILE* out) {
  for (const auto& vm : r.vms) {
    fmt::print(out, "=== VM {} ({}) ===\n", vm.label, vm.spec);
    fmt::print(out, "{}", vm.log);
    if (!vm.log.empty() && vm.log.back() != '\n') fmt::print(out, "\n");
  }
  fmt::print(out, "=== {} VMs side by side ===\n", r.vms.size());
  fmt::print(out, "{:<12} {:<12} {:>5} {:<12} {:>12} {:>10} {:>10} {:>6} {:>8} {:>10}\n", "VM", "lock", "vCPUs",
             "outcome", "ops/s", "lat-p50", "lat-p99", "Jain", "cpu-s", "start");
  for (const auto& vm : r.vms) {
    const auto& j = vm.result;
    const std::string lock = vm.plan->lock.empty() ? vm.plan->workload : vm.plan->lock;
    const unsigned vcpus = vm.plan->vcpus;
    const std::string start = vm.first_entry_ns && r.gate_opened_ns
                                  ? fmt::format("+{:.1f}ms", static_cast<double>(*vm.first_entry_ns - r.gate_opened_ns) * 1e-6)
                                  : "-";
    fmt::print(out, "{:<12} {:<12} {:>5} {:<12} {:>12} {:>10} {:>10} {:>6} {:>8} {:>10}\n", vm.label, lock, vcpus,
               vm.outcome, number_at(j, "/ops_per_sec", "{:.0f}"), number_at(j, "/latency_ns/p50", "{:.0f}ns"),
               number_at(j, "/latency_ns/p99", "{:.0f}ns"), number_at(j, "/fairness/jain", "{:.3f}"),
               number_at(j, "/cpu_seconds", "{:.3f}"), start);
  }
  fmt::print(out, "(ops/s: acquisitions per second over the VM's measured window; lat: acquisition latency; Jain: "
                  "fairness over its vCPUs; cpu-s: host CPU time of its vCPU threads; start: first guest entry after "
                  "the start time the gate gave)\n");
  if (r.start_skew_ms) fmt::print(out, "guest start skew: {:.2f} ms between the first and the last VM's first entry\n", *r.start_skew_ms);
  if (!r.hogs.is_null()) fmt::print(out, "{}\n", hogs_line(r.hogs));
  for (const auto& vm : r.vms)
    if (vm.exit_code != 0)
      fmt::print(out, "VM {}: {} (exit code {}){}: {}\n", vm.label, vm.outcome, vm.exit_code,
                 vm.stopped_by.empty() ? "" : ", " + vm.stopped_by, vm.reason);
  fmt::print(out, "outcome: {} (exit code {})\n", r.failure.empty() ? "every VM completed" : r.failure, r.exit_code);
}

}  // namespace lockvisor::multivm
