// lockvisor-runstate-probe: measures the vCPU run-state page on this host
// (docs/runstate.md). Needs BPF privilege (root) and kernel BTF.
//
//  1. Accuracy: N threads spin pinned to one CPU for a while; per thread, the
//     page's preemption count against the kernel's involuntary context
//     switches over the same window.
//  2. Latency: a reader on another CPU polls the page; from the program's
//     timestamp of each change to the reader seeing it (median, p99).
//  3. Cost (--cost): two threads ping-pong through pipes on one CPU, without
//     the program, with it but unregistered, and registered as vCPUs.
#include <sys/utsname.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "vmm/runstate/runstate_experiment.h"
#include "vmm/util/error.h"

namespace rs = lockvisor::runstate;
namespace ex = lockvisor::runstate::experiment;

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Measures the vCPU run-state page: accuracy, latency, cost"};
  std::vector<unsigned> thread_counts{2, 3, 4};
  unsigned repeats = 3;
  unsigned milliseconds = 1000;
  int spin_cpu = -1;
  int reader_cpu = -1;
  unsigned cost_rounds = 0;
  bool verbose = false;
  app.add_option("--threads", thread_counts, "spinning threads pinned to one CPU (one run per value)")
      ->delimiter(',');
  app.add_option("--repeats", repeats, "runs per thread count")->check(CLI::Range(1U, 100U));
  app.add_option("--ms", milliseconds, "length of each run in ms")->check(CLI::Range(10U, 60000U));
  app.add_option("--spin-cpu", spin_cpu, "CPU the spinners share (default: the last allowed)");
  app.add_option("--reader-cpu", reader_cpu, "CPU of the reader (default: the first allowed other one)");
  app.add_option("--cost", cost_rounds, "also measure the cost per switch: rounds of 3 ping-pong runs");
  app.add_flag("-v,--verbose", verbose, "show libbpf's log (spdlog debug level)");
  CLI11_PARSE(app, argc, argv);
  if (verbose) spdlog::set_level(spdlog::level::debug);

  std::vector<int> cpus = ex::allowed_cpus();
  if (cpus.empty()) {
    std::fprintf(stderr, "lockvisor-runstate-probe: no CPU allowed\n");
    return 6;
  }
  if (spin_cpu < 0) spin_cpu = cpus.back();
  if (reader_cpu < 0) {
    for (int cpu : cpus)
      if (cpu != spin_cpu) {
        reader_cpu = cpu;
        break;
      }
  }
  std::fflush(stdout);
  utsname uts{};
  ::uname(&uts);
  fmt::print("host: {} | kernel {} | {} CPUs allowed | spinners on CPU {}, reader on CPU {}\n", cpu_model(),
             uts.release, cpus.size(), spin_cpu, reader_cpu < 0 ? std::string("none") : std::to_string(reader_cpu));

  try {
    {
    rs::RunStatePage page = rs::RunStatePage::open(lockvisor::abi::kRunStateMaxVcpus);
    fmt::print("program: id {} on {}\n\n", page.program_id(), page.attach_point());

    fmt::print("accuracy: per thread, page preemptions vs involuntary switches (getrusage) in the same window\n");
    fmt::print("{:>7} {:>3} {:>8} {:>6} {:>9} {:>9} {:>5} {:>6} {:>6} {:>6} {:>9} {:>9}\n", "threads", "run", "tid",
               "vcpu", "page_pre", "nivcsw", "diff", "sleeps", "nvcsw", "anom", "seen_pre", "steal_ms");
    std::vector<double> all_latencies;
    std::uint64_t all_discarded = 0;
    std::uint64_t all_anomalies = 0;
    std::uint64_t all_recursion_misses = 0;
    unsigned thread_runs = 0;
    long total_page = 0;
    long total_kernel = 0;
    long worst_difference = 0;
    for (unsigned threads : thread_counts) {
      for (unsigned run_index = 0; run_index < repeats; ++run_index) {
        ex::PinnedOptions options;
        options.threads = threads;
        options.spin_cpu = spin_cpu;
        options.reader_cpu = reader_cpu;
        options.duration = std::chrono::milliseconds(milliseconds);
        ex::PinnedRun run = ex::run_pinned(page, options);
        for (const ex::ThreadCounts& t : run.threads) {
          fmt::print("{:>7} {:>3} {:>8} {:>6} {:>9} {:>9} {:>5} {:>6} {:>6} {:>6} {:>9} {:>9.1f}\n", threads,
                     run_index, t.tid, t.vcpu, t.page_preemptions, t.involuntary, t.preemption_difference(),
                     t.page_sleeps, t.voluntary, t.page_anomalies, t.seen_preempted, t.page_preempted_ns / 1e6);
          total_page += static_cast<long>(t.page_preemptions);
          total_kernel += static_cast<long>(t.involuntary);
          all_anomalies += t.page_anomalies;
          ++thread_runs;
          worst_difference = std::max(worst_difference, std::abs(static_cast<long>(t.preemption_difference())));
        }
        all_latencies.insert(all_latencies.end(), run.latency_samples_ns.begin(), run.latency_samples_ns.end());
        all_discarded += run.latency_discarded;
        all_recursion_misses += run.stats_delta.recursion_misses;
        if (reader_cpu >= 0)
          fmt::print("        change -> reader: {} timed ({} after a reader gap, not timed), min {:.0f} ns, median "
                   "{:.0f} ns, p99 {:.0f} ns, max {:.0f} ns; program recursion misses {}\n",
                   run.latency.samples, run.latency_discarded, run.latency.min_ns, run.latency.median_ns,
                   run.latency.p99_ns, run.latency.max_ns, run.stats_delta.recursion_misses);
      }
    }
    fmt::print("\nsummary: {} thread runs: page preemptions {} vs involuntary switches {} (worst per-thread "
               "difference {}); {} switch-ins the program never saw (anomalies); {} recursion misses\n",
               thread_runs, total_page, total_kernel, worst_difference, all_anomalies, all_recursion_misses);
    if (reader_cpu >= 0) {
      ex::LatencySummary latency = ex::summarize(all_latencies);
      fmt::print("summary: change -> reader on another CPU, all runs: {} timed ({} not timed: reader interrupted), "
                 "median {:.0f} ns, p99 {:.0f} ns, max {:.0f} ns\n",
                 latency.samples, all_discarded, latency.median_ns, latency.p99_ns, latency.max_ns);
    }
    }
    if (cost_rounds > 0) {
      // Rounds alternate between no program at all, the program attached
      // with the threads unregistered (what every other task pays), and
      // registered (what a vCPU thread pays), so drift hits all three alike.
      constexpr unsigned kRoundTrips = 50'000;
      std::vector<double> without, unregistered, registered;
      for (unsigned round = 0; round < cost_rounds; ++round) {
        without.push_back(ex::pingpong_ns(spin_cpu, kRoundTrips, nullptr, false));
        rs::RunStatePage page = rs::RunStatePage::open(2);
        unregistered.push_back(ex::pingpong_ns(spin_cpu, kRoundTrips, &page, false));
        registered.push_back(ex::pingpong_ns(spin_cpu, kRoundTrips, &page, true));
      }
      double base = median(without);
      fmt::print("\ncost: pipe ping-pong on CPU {}, {} round trips (2 switches each), median of {} rounds\n",
                 spin_cpu, kRoundTrips, cost_rounds);
      fmt::print("  no program:                               {:7.0f} ns per round trip\n", base);
      fmt::print("  program attached, threads not registered: {:7.0f} ns per round trip ({:+.0f} ns per switch)\n",
                 median(unregistered), (median(unregistered) - base) / 2);
      fmt::print("  program attached, threads registered:     {:7.0f} ns per round trip ({:+.0f} ns per switch)\n",
                 median(registered), (median(registered) - base) / 2);
    }
  } catch (const lockvisor::Error& e) {
    std::fprintf(stderr, "lockvisor-runstate-probe: %s\n", e.what());
    return 6;
  }
  return 0;
}
