// The frame every counting workload runs in: N worker threads started
// together, stopped together after the duration, each counting its
// operations and timing a sample of them.
#pragma once
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <time.h>

#include "guest/linux/parameters.h"

namespace lockvisor::linux_init {

inline std::uint64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

// One worker thread's view: its counters, its samples, its stop flag.
class Worker {
 public:
  // A worker keeps at most this many latency samples; past that, a sample
  // replaces a random kept one (reservoir sampling), so long runs stay
  // bounded in memory and the kept samples stay a uniform choice.
  static constexpr std::size_t kMaxSamples = 1u << 15;

  Worker(unsigned index, const std::atomic<bool>& stop, unsigned sample_every, std::uint64_t seed);

  unsigned index() const { return index_; }
  bool stopping() const { return stop_.load(std::memory_order_relaxed); }

  // Calls op() until the run stops or op() returns false (the worker is done
  // or failed: op calls fail() first then). Every op() that returned true is
  // one operation; every sample_every-th one is timed unless `timed` is
  // false (for operations whose time is mostly waiting for another worker).
  template <typename Op>
  void loop(Op&& op, bool timed = true) {
    while (!stopping()) {
      if (timed && ++until_sample_ == sample_every_) {
        until_sample_ = 0;
        const std::uint64_t start = monotonic_ns();
        if (!op()) return;
        record_sample(monotonic_ns() - start);
      } else if (!op()) {
        return;
      }
      ++ops_;
    }
  }

  // Records why this worker stopped early (the first reason only); the run
  // then fails.
  void fail(std::string reason);

  // xorshift64*: cheap per-worker pseudo-random numbers, seeded from the
  // run's seed and the worker's index.
  std::uint64_t random();

  std::uint64_t ops() const { return ops_; }
  const std::vector<std::uint64_t>& samples() const { return samples_; }
  const std::optional<std::string>& failure() const { return failure_; }

 private:
  void record_sample(std::uint64_t ns);

  unsigned index_;
  const std::atomic<bool>& stop_;
  unsigned sample_every_;
  unsigned until_sample_ = 0;
  std::uint64_t rng_;
  std::uint64_t ops_ = 0;
  std::uint64_t samples_seen_ = 0;
  std::vector<std::uint64_t> samples_;
  std::optional<std::string> failure_;
};

class Workload {
 public:
  virtual ~Workload() = default;
  // How many workers to start when `requested` were asked for (the pipe
  // workload runs pairs).
  virtual unsigned workers(unsigned requested) const { return requested; }
  // Shared state for `workers` workers; an error message when it cannot be
  // set up. Runs before any worker starts.
  virtual std::optional<std::string> prepare(unsigned workers, const Parameters& parameters) = 0;
  // One worker's whole run: usually worker.loop(...).
  virtual void run(Worker& worker) = 0;
};

struct WorkloadResult {
  std::vector<std::uint64_t> per_thread_ops;
  std::uint64_t elapsed_ns = 0;              // from the start signal until every worker has ended
  std::vector<std::uint64_t> latency_ns;     // every worker's samples
  std::vector<std::string> errors;           // empty when every worker ran to the end
};

// Starts `workers` threads running `workload`, releases them together, stops
// them after parameters.duration_ms and collects their counts. Throws
// std::system_error when a thread cannot be created (caught by main).
WorkloadResult run_workload(Workload& workload, unsigned workers, const Parameters& parameters);

struct LatencyPercentiles {
  std::uint64_t samples = 0;
  std::uint64_t p50 = 0, p90 = 0, p99 = 0, p999 = 0, max = 0, mean = 0;
};

// Nearest-rank percentiles, the definition of vmm/metrics/summary.h
// (rank = max(1, ceil(p * n)), here in exact integer arithmetic). All zero
// for no samples.
LatencyPercentiles latency_percentiles(std::vector<std::uint64_t> samples);

}  // namespace lockvisor::linux_init
