#include "vmm/conformance/linux_cases.h"

#include <fmt/format.h>

#include <cstdint>
#include <deque>
#include <fstream>
#include <iterator>
#include <string_view>

#include "vmm/machine/run_result.h"
#include "vmm/util/error.h"
#include "vmm/util/guest_text.h"

namespace lockvisor::conformance {
namespace {

using nlohmann::json;

// Every key of run's --json report that the Linux cases read, named here
// and nowhere else (the report's shape: docs/linux-guests.md, "The
// workloads"): `path` is its JSON pointer.
struct ReportKey {
  const char* name;  // in reasons and figures
  const char* path;
};
constexpr ReportKey kGuestSpinlock{"guest_spinlock", "/linux/guest_spinlock"};
constexpr ReportKey kCpusOnline{"guest_cpus_online", "/guest_cpus_online"};
constexpr ReportKey kHaltExits{"halt_exits", "/kvm_totals/halt_exits"};
constexpr ReportKey kHypercalls{"hypercalls", "/kvm_totals/hypercalls"};
constexpr ReportKey kOpsPerSec{"ops_per_sec", "/ops_per_sec"};
constexpr ReportKey kSettings{"settings", "/settings"};
constexpr ReportKey kReason{"reason", "/vm/reason"};
constexpr ReportKey kOutcome{"outcome", "/outcome"};
constexpr ReportKey kKernelEndLine{"kernel_end", "/linux/kernel_end/line"};
// What a failure reason and a PASS line show, in this order.
constexpr const ReportKey* kFigures[] = {&kGuestSpinlock, &kCpusOnline, &kHaltExits, &kHypercalls, &kOpsPerSec};

// The key's value, null when the report does not have it.
json read(const json& report, const ReportKey& key) {
  if (!report.is_object()) return nullptr;
  const json::json_pointer pointer(key.path);
  if (report.contains(pointer)) return report.at(pointer);
  return nullptr;
}

std::string figure_text(const json& value) {
  if (value.is_null()) return "-";
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_float()) return fmt::format("{:.0f}", value.get<double>());
  return value.dump();
}

// Accumulates the first expectation the report does not meet.
class ReportExpect {
 public:
  explicit ReportExpect(const json& report) : report_(report) {}
  ReportExpect& is(const ReportKey& key, const char* expected) {
    const json v = read(report_, key);
    if (!v.is_string() || v.get<std::string>() != expected)
      fail_with(fmt::format("{}: expected {}, reported {}", key.name, expected, figure_text(v)));
    return *this;
  }
  ReportExpect& is(const ReportKey& key, std::int64_t expected) {
    const json v = read(report_, key);
    if (!v.is_number_integer() || v.get<std::int64_t>() != expected)
      fail_with(fmt::format("{}: expected {}, reported {}", key.name, expected, figure_text(v)));
    return *this;
  }
  ReportExpect& has(const ReportKey& key, std::string_view part) {
    const json v = read(report_, key);
    if (!v.is_string() || v.get<std::string>().find(part) == std::string::npos)
      fail_with(fmt::format("{}: expected to contain '{}', reported {}", key.name, part, figure_text(v)));
    return *this;
  }
  ReportExpect& positive(const ReportKey& key) {
    const json v = read(report_, key);
    if (!v.is_number() || !(v.get<double>() > 0))
      fail_with(fmt::format("{}: expected more than 0, reported {}", key.name, figure_text(v)));
    return *this;
  }
  std::optional<std::string> done() const {
    if (!failure_) return std::nullopt;
    return fmt::format("{} ({})", *failure_, linux_figures_text(report_));
  }

 private:
  void fail_with(std::string why) {
    if (!failure_) failure_ = std::move(why);
  }
  const json& report_;
  std::optional<std::string> failure_;
};

// A bzImage cut short: its setup header is intact, its payload is not.
constexpr std::streamsize kTruncatedBytes = 100000;

void write_truncated_copy(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  std::string bytes(static_cast<std::size_t>(kTruncatedBytes), '\0');
  in.read(bytes.data(), kTruncatedBytes);
  bytes.resize(static_cast<std::size_t>(in.gcount()));
  std::ofstream out(to, std::ios::binary | std::ios::trunc);
  out << bytes;
  if (bytes.empty() || !out.flush()) fail_host("cannot write a truncated copy of {} to {}", from, to);
}

// The last `count` non-blank lines of a child's output, made safe to show.
std::vector<std::string> last_lines(const std::filesystem::path& log, std::size_t count) {
  std::ifstream in(log, std::ios::binary);
  std::deque<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    lines.push_back(valid_utf8(line));
    if (lines.size() > count) lines.pop_front();
  }
  return {std::make_move_iterator(lines.begin()), std::make_move_iterator(lines.end())};
}

constexpr std::size_t kFailureLogLines = 15;

}  // namespace

std::vector<LinuxCase> linux_cases(const LinuxKernels& k) {
  const std::string kernel = k.kernel;
  const std::string truncated = k.truncated;
  const auto futex_hash = [&](const std::string& vcpus, const char* lock) {
    return std::vector<std::string>{"--kernel", kernel, "--vcpus", vcpus, "--pcpus", "0", "--guest-lock", lock,
                                    "--workload", "futex-hash", "--duration", "1"};
  };
  std::vector<LinuxCase> cases;
  cases.push_back({.name = "pv-4-on-1-kicks-and-halts",
                   .summary = "PV_UNHALT shown: the PV qspinlock; at 4 vCPUs on 1 CPU waiters halt, unlockers kick",
                   .args = futex_hash("4", "pv"),
                   .check = [](const json& r) {
                     return ReportExpect(r)
                         .is(kGuestSpinlock, "pv")
                         .is(kCpusOnline, 4)
                         .positive(kHaltExits)
                         .positive(kHypercalls)
                         .positive(kOpsPerSec)
                         .done();
                   }});
  cases.push_back({.name = "tas-when-pv-unhalt-hidden",
                   .summary = "PV_UNHALT hidden: virt_spin_lock's test-and-set",
                   .args = futex_hash("2", "tas"),
                   .check = [](const json& r) {
                     return ReportExpect(r).is(kGuestSpinlock, "tas").positive(kOpsPerSec).done();
                   }});
  cases.push_back({.name = "native-with-realtime-hint",
                   .summary = "the KVM_HINTS_REALTIME hint: the native queued spinlock",
                   .args = futex_hash("2", "native"),
                   .check = [](const json& r) {
                     return ReportExpect(r).is(kGuestSpinlock, "native").positive(kOpsPerSec).done();
                   }});
  cases.push_back({.name = "cloud-kernel-every-cpu-online",
                   .summary = "--linux-cloud (finds its CPUs through ACPI only): every CPU online, PV spinlocks",
                   .args = {"--kernel", k.cloud, "--vcpus", "4", "--pcpus", "0", "--workload", "hello"},
                   .check = [](const json& r) {
                     return ReportExpect(r).is(kCpusOnline, 4).is(kGuestSpinlock, "pv").done();
                   },
                   .not_applicable = k.cloud.empty() ? "no --linux-cloud kernel given" : ""});
  cases.push_back({.name = "truncated-kernel-refused",
                   .summary = "a truncated copy of the kernel is refused before anything runs (exit 2)",
                   .args = {"--kernel", truncated, "--vcpus", "1"},
                   .expected_exit = machine::exit_code(machine::Outcome::kUsageError),
                   .prepare = [kernel, truncated] { write_truncated_copy(kernel, truncated); }});
  cases.push_back({.name = "never-reaches-init-times-out",
                   .summary = "a kernel that never reaches its init ends at --timeout (exit 4)",
                   .args = {"--kernel", kernel, "--vcpus", "1", "--append", "rdinit=/nonexistent panic=0", "--timeout",
                            "20"},
                   .expected_exit = machine::exit_code(machine::Outcome::kTimeout)});
  // No initramfs init and no root= to mount: the kernel panics and (panic=-1)
  // resets; the outcome is the panic, named by its line.
  cases.push_back({.name = "unmountable-root-is-a-kernel-panic",
                   .summary = "a kernel that cannot mount its root panics: outcome kernel-panic (exit 3), its line",
                   .args = {"--kernel", kernel, "--vcpus", "1", "--append", "rdinit=/nonexistent", "--timeout", "60"},
                   .expected_exit = machine::exit_code(machine::Outcome::kGuestFault),
                   .check = [](const json& r) {
                     return ReportExpect(r)
                         .is(kOutcome, "kernel-panic")
                         .has(kKernelEndLine, "Kernel panic - not syncing: VFS: Unable to mount root fs")
                         .has(kReason, "Kernel panic - not syncing")
                         .done();
                   }});
  return cases;
}

std::string linux_figures_text(const json& report) {
  std::string text;
  for (const ReportKey* key : kFigures)
    text += fmt::format("{}{}={}", text.empty() ? "" : ", ", key->name, figure_text(read(report, *key)));
  return text;
}

std::optional<std::string> judge_linux_run(const LinuxCase& c, const machine::ChildRun& run, double timeout_s) {
  if (run.timed_out) return fmt::format("no end within {} s: killed", timeout_s);
  if (run.exit_code != c.expected_exit)
    return fmt::format("exit code {} ({}), expected {} ({})", run.exit_code, machine::outcome_for_exit_code(run.exit_code),
                       c.expected_exit, machine::outcome_for_exit_code(c.expected_exit));
  if (!c.check) return std::nullopt;
  if (!run.report.is_object()) return std::string("no --json report");
  return c.check(run.report);
}

CaseResult run_linux_case(const LinuxCase& c, const std::string& lockvisor, const std::filesystem::path& scratch,
                          double timeout_s) {
  CaseResult result;
  result.name = c.name;
  if (!c.not_applicable.empty()) {
    result.applicable = false;
    result.reason = c.not_applicable;
    return result;
  }
  const auto log = scratch / (c.name + ".log");
  try {
    if (c.prepare) c.prepare();
    const auto run = machine::run_child(lockvisor, c.args, (scratch / (c.name + ".json")).string(), log.string(),
                                        timeout_s);
    result.seconds = run.wall_s;
    result.outcome = run.timed_out ? "case-timeout" : machine::outcome_for_exit_code(run.exit_code);
    result.settings = read(run.report, kSettings);
    const auto tail = last_lines(log, kFailureLogLines);
    const json reason = read(run.report, kReason);
    // Without a report (a refused kernel), the child's last line says why.
    constexpr std::string_view kErrorPrefix = "lockvisor: error: ";
    result.run_reason = reason.is_string() ? reason.get<std::string>() : tail.empty() ? "" : tail.back();
    if (result.run_reason.starts_with(kErrorPrefix)) result.run_reason.erase(0, kErrorPrefix.size());
    if (auto failure = judge_linux_run(c, run, timeout_s)) {
      result.reason = *failure;
      result.details = tail;
    } else {
      result.passed = true;
      result.reason = c.check ? linux_figures_text(run.report) : result.run_reason;
    }
  } catch (const Error& e) {
    result.reason = e.what();
  }
  return result;
}

}  // namespace lockvisor::conformance
