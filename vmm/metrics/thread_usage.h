// What the host charged one thread (a vCPU thread or a native worker) so far:
// CPU time, time runnable but waiting for a CPU (steal, seen from the host)
// and context switches. Sampled by the thread itself at the edges of the
// measured window (the guest's window marks, the native runner's hook), so
// that per-window costs are end minus start.
#pragma once
#include <cstdint>
#include <optional>

namespace lockvisor::metrics {

struct ThreadUsage {
  double cpu_seconds = 0;                         // CLOCK_THREAD_CPUTIME_ID
  std::optional<std::uint64_t> runqueue_wait_ns;  // /proc/thread-self/schedstat field 2 (absent: no schedstat)
  std::uint64_t voluntary_switches = 0;           // getrusage(RUSAGE_THREAD) ru_nvcsw
  std::uint64_t involuntary_switches = 0;         // ru_nivcsw: preempted
};

// Second field of /proc/thread-self/schedstat: ns the calling thread spent
// runnable but waiting for a CPU (for a vCPU thread, its steal time).
std::optional<std::uint64_t> runqueue_wait_ns();

// The calling thread's usage now.
ThreadUsage sample_thread_usage();

// end - start, field by field (run-queue wait only when both have it;
// counts that went backwards give 0, never a wrapped value).
ThreadUsage usage_between(const ThreadUsage& start, const ThreadUsage& end);

}  // namespace lockvisor::metrics
