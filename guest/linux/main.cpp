// lockvisor's /init for real Linux guests: as the guest's PID 1 it mounts
// what it reads, takes its parameters from the kernel command line, reports
// the kernel's spinlock choice and the CPUs online, runs one workload and
// reports on the console (console_protocol.h), then powers the machine off.
// Run as an ordinary process (tests, or a look at a workload on the host) it
// takes its parameters as options and neither mounts nor powers off.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <time.h>
#include <unistd.h>

#include "guest/linux/console_protocol.h"
#include "guest/linux/cpus.h"
#include "guest/linux/kernel_log.h"
#include "guest/linux/parameters.h"
#include "guest/linux/pid1.h"
#include "guest/linux/read_file.h"
#include "guest/linux/report_line.h"
#include "guest/linux/workload.h"
#include "guest/linux/workloads/workloads.h"

namespace lockvisor::linux_init {
namespace {

constexpr int kConsole = 1;

class Reporter {
 public:
  void emit(const ReportLine& line) { write_report_line(kConsole, line); }
  void error(std::string_view text) {
    if (errors_ < kMaxErrorLines) emit(ReportLine(record::kError).text("text", text));
    ++errors_;
  }

 private:
  unsigned errors_ = 0;
};

std::string self_path(const char* argv0) {
  if (argv0 != nullptr && std::string_view(argv0).find('/') != std::string_view::npos) return argv0;
  char buffer[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  return n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : std::string("/init");
}

ParsedParameters read_parameters(bool pid1, int argc, char** argv) {
  if (!pid1) {
    std::vector<std::string_view> args(argv + 1, argv + argc);
    return parse_program_options(args);
  }
  const auto cmdline = read_small_file("/proc/cmdline");
  if (!cmdline) {
    ParsedParameters parsed;
    parsed.errors.push_back("cannot read /proc/cmdline");
    return parsed;
  }
  return parse_kernel_command_line(*cmdline);
}

bool known_workload(std::string_view name) {
  for (const std::string_view known : workload_names())
    if (known == name) return true;
  return false;
}

void sleep_ms(std::uint64_t ms) {
  timespec left{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1'000'000};
  while (::nanosleep(&left, &left) != 0) {
  }
}

int run_counting_workload(Reporter& out, const Parameters& p, unsigned threads, const std::string& self) {
  const auto workload = make_workload(p.workload, self);
  const unsigned workers = workload->workers(threads);
  if (auto error = workload->prepare(workers, p)) {
    out.error(*error);
    return kExitWorkloadFailed;
  }
  const WorkloadResult result = run_workload(*workload, workers, p);
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < result.per_thread_ops.size(); ++i) {
    total += result.per_thread_ops[i];
    out.emit(ReportLine(record::kThread).number("index", i).number("ops", result.per_thread_ops[i]));
  }
  out.emit(ReportLine(record::kResult).number("threads", workers).number("ops", total).number("elapsed_ns", result.elapsed_ns));
  const LatencyPercentiles l = latency_percentiles(result.latency_ns);
  if (l.samples > 0)
    out.emit(ReportLine(record::kLatency)
                 .number("every", p.sample_every)
                 .number("samples", l.samples)
                 .number("p50_ns", l.p50)
                 .number("p90_ns", l.p90)
                 .number("p99_ns", l.p99)
                 .number("p999_ns", l.p999)
                 .number("max_ns", l.max)
                 .number("mean_ns", l.mean));
  for (const std::string& error : result.errors) out.error(error);
  return result.errors.empty() ? kExitOk : kExitWorkloadFailed;
}

// The exit status, or nothing for --help (which prints no report).
std::optional<int> run(Reporter& out, bool pid1, int argc, char** argv) {
  std::vector<MountOutcome> mounts;
  if (pid1) {
    mounts = mount_pseudo_file_systems();
    ensure_console();
  }
  ParsedParameters parsed = read_parameters(pid1, argc, argv);
  if (parsed.help) {
    std::printf("usage: %s [options]   (as PID 1: options from the kernel command line)\n%s", argv[0],
                parameters_help().c_str());
    return std::nullopt;
  }
  const Parameters& p = parsed.parameters;
  if (!known_workload(p.workload)) parsed.errors.push_back("unknown workload '" + p.workload + "'");
  out.emit(ReportLine(record::kStart)
               .number("version", kProtocolVersion)
               .text("workload", p.workload)
               .number("duration_ms", p.duration_ms)
               .number("threads", p.threads)
               .number("seed", p.seed)
               .number("sample_every", p.sample_every)
               .number("pid1", pid1 ? 1 : 0));
  for (const MountOutcome& m : mounts)
    out.emit(ReportLine(record::kMount).text("target", m.target).number("errno", static_cast<unsigned>(m.error)));
  if (!parsed.errors.empty()) {
    for (const std::string& error : parsed.errors) out.error(error);
    return kExitBadParameters;
  }

  const SpinlockLog log = read_spinlock_log();
  out.emit(ReportLine(record::kSpinlockLog)
               .text("source", log.source)
               .number("errno", static_cast<unsigned>(log.error))
               .number("lines", log.lines.size()));
  for (const std::string& line : log.lines) out.emit(ReportLine(record::kSpinlock).text("text", line));

  const OnlineCpus cpus = online_cpus();
  ReportLine cpu_line(record::kCpus);
  cpu_line.number("sysconf", cpus.sysconf > 0 ? static_cast<std::uint64_t>(cpus.sysconf) : 0);
  if (cpus.sysfs) cpu_line.number("sysfs", *cpus.sysfs);
  cpu_line.text("list", cpus.sysfs_list);
  out.emit(cpu_line);

  unsigned threads = p.threads;
  if (threads == 0) threads = cpus.sysconf > 0 ? static_cast<unsigned>(std::min<long>(cpus.sysconf, kMaxThreads)) : 1;

  if (p.workload == "hello") return kExitOk;
  if (p.workload == "idle") {
    sleep_ms(p.duration_ms);
    return kExitOk;
  }
  return run_counting_workload(out, p, threads, self_path(argv[0]));
}

}  // namespace
}  // namespace lockvisor::linux_init

int main(int argc, char** argv) {
  using namespace lockvisor::linux_init;
  // The spawn workload's child: exit before doing anything at all.
  if (argc >= 2 && std::string_view(argv[1]) == kSpawnChildArgument) return 0;
  const bool pid1 = ::getpid() == 1;
  Reporter out;
  int status = kExitWorkloadFailed;
  try {
    const std::optional<int> ran = run(out, pid1, argc, argv);
    if (!ran) return kExitOk;
    status = *ran;
  } catch (const std::exception& e) {
    out.error(std::string("internal error: ") + e.what());
  } catch (...) {
    out.error("internal error");
  }
  out.emit(ReportLine(record::kExit).number("status", static_cast<unsigned>(status)));
  // PID 1 must not return: the kernel panics when init exits.
  if (pid1) power_off();
  return status;
}
