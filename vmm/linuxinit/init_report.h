// What lockvisor's Linux /init reported on the guest's console, parsed from
// the console lines (the protocol: guest/linux/console_protocol.h).
//
// The console is untrusted: the guest kernel, anything it runs, or a line
// cut by a kernel message can put anything there. The parser looks only at
// lines carrying the protocol prefix and a correct checksum, refuses a line
// that is too long, has too many or repeated fields, a number that does not
// parse or is out of range, or a record that repeats, comes before `start`
// or after `exit`; it keeps bounded counts of everything, never throws for
// guest input, and says what it refused (InitReport::problems). Lines
// without the prefix (the kernel's own messages) are only counted.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace lockvisor::linux_guest {

struct InitMount {
  std::string target;
  std::uint64_t error = 0;  // errno; 0 = mounted
};

struct InitCpus {
  std::uint64_t sysconf = 0;             // sysconf(_SC_NPROCESSORS_ONLN); 0 when it failed
  std::optional<std::uint64_t> sysfs;    // CPUs in /sys/devices/system/cpu/online, when readable
  std::string list;                      // that file's text, e.g. "0-3"
};

struct InitResult {
  std::uint64_t threads = 0;
  std::uint64_t ops = 0;
  std::uint64_t elapsed_ns = 0;
};

struct InitLatency {
  std::uint64_t every = 0;  // every Nth operation was timed
  std::uint64_t samples = 0;
  std::uint64_t p50_ns = 0, p90_ns = 0, p99_ns = 0, p999_ns = 0, max_ns = 0, mean_ns = 0;
};

struct InitReport {
  // start
  bool started = false;
  std::uint64_t protocol_version = 0;
  std::string workload;
  std::uint64_t duration_ms = 0;
  std::uint64_t threads_requested = 0;  // 0 = one per online CPU
  std::uint64_t seed = 0;
  std::uint64_t sample_every = 0;
  bool pid1 = false;

  std::vector<InitMount> mounts;
  std::optional<std::string> spinlock_log_source;  // "kmsg", "klogctl", "none"
  std::uint64_t spinlock_log_error = 0;
  std::uint64_t spinlock_log_lines_announced = 0;
  std::vector<std::string> spinlock_log;           // raw kernel messages (bytes as sent)
  std::optional<InitCpus> cpus;
  std::map<std::uint64_t, std::uint64_t> thread_ops;  // worker index -> operations
  std::optional<InitResult> result;
  std::optional<InitLatency> latency;
  std::vector<std::string> errors;                 // the init's own error lines
  std::uint64_t errors_dropped = 0;                // error lines past kMaxErrorLines
  std::optional<std::uint64_t> exit_status;

  // How the report itself went.
  std::uint64_t lines_seen = 0;
  std::uint64_t lines_ignored = 0;   // without the prefix: the kernel's and others' output
  std::uint64_t lines_rejected = 0;  // with the prefix, but refused
  std::vector<std::string> problems;  // why, at most kMaxProblems (then only counted)
  std::uint64_t problems_dropped = 0;
  // Set by finish(): an exit line came, and the figures are consistent
  // (a thread line for every worker, their sum equal to the total, every
  // announced spinlock line present).
  bool complete = false;

  // Per-worker operations in index order, when every worker reported.
  std::optional<std::vector<std::uint64_t>> per_thread_ops() const;
};

inline constexpr std::size_t kMaxProblems = 16;

class InitReportParser {
 public:
  // One console line, with or without its '\n' / "\r\n".
  void feed_line(std::string_view line);
  // The report so far (complete is only set by finish()).
  const InitReport& report() const { return report_; }
  // Checks the report for consistency, sets `complete`, and returns it.
  InitReport finish();

 private:
  void reject(std::string reason);
  void problem(std::string reason);
  InitReport report_;
  bool unsupported_version_ = false;
};

// Convenience: every line of `text` (split at '\n').
InitReport parse_init_report(std::string_view text);

// The report as fields of lockvisor's JSON run report:
//   workload, workload_exit_status (null when the init never finished),
//   guest_cpus_online (the sysfs count, else the sysconf count, else null),
//   guest_spinlock_log (raw lines; the VMM classifies them),
//   threads, ops_total, duration_s, ops_per_sec, per_thread_ops,
//   fairness {over: "per_thread_ops", jain, cv, max_min_ratio}
//     (vmm/metrics/summary.h; every thread runs for the same time, so
//     fairness over the counts is fairness over the rates),
//   latency_ns {p50, p90, p99, p999, max, mean, count, every}
//     (null where the workload counts nothing or the figures are missing),
//   guest_init {protocol_version, pid1, duration_ms, threads_requested, seed,
//     sample_every, mounts, spinlock_log_source, cpus, errors, complete,
//     lines_seen, lines_ignored, lines_rejected, problems}.
// Guest text is made valid UTF-8 (vmm/util/guest_text.h).
nlohmann::json init_report_json(const InitReport& report);

}  // namespace lockvisor::linux_guest
