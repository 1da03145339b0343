#include "vmm/metrics/thread_usage.h"

#include <sys/resource.h>
#include <time.h>

#include <cstdio>

namespace lockvisor::metrics {
std::optional<std::uint64_t> runqueue_wait_ns() {
  std::FILE* f = std::fopen("/proc/thread-self/schedstat", "r");
  if (f == nullptr) return std::nullopt;
  unsigned long long running = 0, waiting = 0;
  const int fields = std::fscanf(f, "%llu %llu", &running, &waiting);
  std::fclose(f);
  if (fields != 2) return std::nullopt;
  return waiting;
}

namespace {

std::uint64_t minus(std::uint64_t end, std::uint64_t start) { return end > start ? end - start : 0; }

}  // namespace

ThreadUsage sample_thread_usage() {
  ThreadUsage u;
  timespec cpu{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
  u.cpu_seconds = static_cast<double>(cpu.tv_sec) + static_cast<double>(cpu.tv_nsec) * 1e-9;
  u.runqueue_wait_ns = runqueue_wait_ns();
  rusage r{};
  if (getrusage(RUSAGE_THREAD, &r) == 0) {
    u.voluntary_switches = static_cast<std::uint64_t>(r.ru_nvcsw);
    u.involuntary_switches = static_cast<std::uint64_t>(r.ru_nivcsw);
  }
  return u;
}

ThreadUsage usage_between(const ThreadUsage& start, const ThreadUsage& end) {
  ThreadUsage d;
  d.cpu_seconds = end.cpu_seconds > start.cpu_seconds ? end.cpu_seconds - start.cpu_seconds : 0;
  if (start.runqueue_wait_ns && end.runqueue_wait_ns)
    d.runqueue_wait_ns = minus(*end.runqueue_wait_ns, *start.runqueue_wait_ns);
  d.voluntary_switches = minus(end.voluntary_switches, start.voluntary_switches);
  d.involuntary_switches = minus(end.involuntary_switches, start.involuntary_switches);
  return d;
}

}  // namespace lockvisor::metrics
