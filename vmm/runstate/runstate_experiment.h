// Experiments on the run-state page, shared by tests/runstate and the
// lockvisor-runstate-probe tool: threads pinned to one host CPU that preempt
// each other (the page's counts against the kernel's own), a reader on
// another CPU that times how soon it sees each change, and the cost per
// context switch.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "vmm/runstate/runstate_page.h"

namespace lockvisor::runstate::experiment {

// CPUs this process may run on, in increasing order.
std::vector<int> allowed_cpus();

struct PinnedOptions {
  unsigned threads = 2;     // spinning "vCPU" threads, all pinned to spin_cpu
  int spin_cpu = 0;
  int reader_cpu = -1;      // a reader polls the page from here; -1: no reader
  unsigned first_vcpu = 0;  // the threads are vCPUs first_vcpu, first_vcpu + 1, ...
  std::chrono::milliseconds duration{1000};
};

// One spinning thread, counted over the same window by the page and by the
// kernel (getrusage(RUSAGE_THREAD), i.e. /proc/thread-self/status's
// nonvoluntary_ctxt_switches), both sampled by the thread itself while it
// runs, so neither can move between the two samples.
struct ThreadCounts {
  pid_t tid = 0;
  unsigned vcpu = 0;
  std::uint64_t page_preemptions = 0;
  std::uint64_t page_sleeps = 0;
  std::uint64_t page_runs = 0;
  std::uint64_t page_anomalies = 0;
  std::uint64_t involuntary = 0;  // ru_nivcsw
  std::uint64_t voluntary = 0;    // ru_nvcsw
  std::uint64_t page_preempted_ns = 0;
  // What the reader saw (zero without a reader).
  std::uint64_t seen_running = 0;
  std::uint64_t seen_preempted = 0;
  std::uint64_t seen_sleeping = 0;
  std::int64_t preemption_difference() const {
    return static_cast<std::int64_t>(page_preemptions) - static_cast<std::int64_t>(involuntary);
  }
};

struct LatencySummary {
  std::size_t samples = 0;
  double min_ns = 0;
  double median_ns = 0;
  double p99_ns = 0;
  double max_ns = 0;
};
LatencySummary summarize(std::vector<double> samples);

struct PinnedRun {
  std::vector<ThreadCounts> threads;
  // From a record's change (its state_since_ns, taken by the program) to the
  // reader seeing the new seq on another CPU, CLOCK_MONOTONIC on both sides.
  // Changes the reader saw right after being interrupted itself (a poll
  // more than 10 us after its previous look) are not timed: counted here.
  LatencySummary latency;
  std::vector<double> latency_samples_ns;  // the timed changes, unsorted
  std::uint64_t latency_discarded = 0;
  std::uint64_t reader_polls = 0;
  ProgramStats stats_delta;  // the program's recursion misses during the run
};

// Registers the threads as vCPUs of `page`, runs them, unregisters them.
PinnedRun run_pinned(RunStatePage& page, const PinnedOptions& options);

// Two threads pinned to `cpu` pass a token back and forth through pipes:
// nanoseconds per round trip (two context switches). With a page, the
// threads are registered as vCPUs 0 and 1 when `register_threads`.
double pingpong_ns(int cpu, unsigned round_trips, RunStatePage* page, bool register_threads);

}  // namespace lockvisor::runstate::experiment
