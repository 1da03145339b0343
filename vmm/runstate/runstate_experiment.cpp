#include "vmm/runstate/runstate_experiment.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <thread>

#include "vmm/util/error.h"
#include "vmm/util/unique_fd.h"

namespace lockvisor::runstate::experiment {
namespace {

std::uint64_t monotonic_ns() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000ULL + static_cast<std::uint64_t>(now.tv_nsec);
}

void pin_self(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (::sched_setaffinity(0, sizeof(set), &set) != 0) fail_host("cannot pin a thread to CPU {}: {}", cpu, std::strerror(errno));
}

void cpu_relax() { __builtin_ia32_pause(); }

// A reader whose look at a record comes later than this after its previous
// look was interrupted in between; what it sees then is not timed.
constexpr std::uint64_t kReaderGapNs = 10'000;

// The calling thread's page record and context-switch counts, taken while it
// runs: retried until its record's seq is the same before and after, i.e.
// no switch of this thread happened in between.
struct SelfSample {
  abi::VcpuRunState record{};
  std::uint64_t involuntary = 0;
  std::uint64_t voluntary = 0;
};

SelfSample sample_self(const abi::VcpuRunState& mine) {
  SelfSample sample;
  for (;;) {
    sample.record = read_record(mine);
    rusage usage{};
    ::getrusage(RUSAGE_THREAD, &usage);
    if (__atomic_load_n(&mine.seq, __ATOMIC_ACQUIRE) != sample.record.seq) continue;
    sample.involuntary = static_cast<std::uint64_t>(usage.ru_nivcsw);
    sample.voluntary = static_cast<std::uint64_t>(usage.ru_nvcsw);
    return sample;
  }
}

// Spinning threads, a reader and the main thread share this.
struct Shared {
  std::atomic<unsigned> ready{0};
  std::atomic<bool> registered{false};
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  std::atomic<bool> reader_stop{false};
};

}  // namespace

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  return cpus;
}

LatencySummary summarize(std::vector<double> samples) {
  LatencySummary summary;
  summary.samples = samples.size();
  if (samples.empty()) return summary;
  std::sort(samples.begin(), samples.end());
  auto at = [&](double q) {
    auto index = static_cast<std::size_t>(std::ceil(q * static_cast<double>(samples.size()))) ;
    return samples[std::min(samples.size() - 1, index == 0 ? 0 : index - 1)];
  };
  summary.min_ns = samples.front();
  summary.median_ns = at(0.5);
  summary.p99_ns = at(0.99);
  summary.max_ns = samples.back();
  return summary;
}

PinnedRun run_pinned(RunStatePage& page, const PinnedOptions& options) {
  if (options.threads == 0 || options.first_vcpu + options.threads > page.max_vcpus())
    fail("run_pinned: vCPUs {}..{} do not fit a page for {} vCPUs", options.first_vcpu,
         options.first_vcpu + options.threads - 1, page.max_vcpus());
  const abi::VcpuRunState* records = page.records();
  Shared shared;
  std::vector<pid_t> tids(options.threads, 0);
  std::vector<SelfSample> starts(options.threads);
  std::vector<SelfSample> ends(options.threads);
  std::vector<std::string> errors(options.threads + 1);

  std::vector<std::thread> spinners;
  for (unsigned i = 0; i < options.threads; ++i) {
    spinners.emplace_back([&, i] {
      try {
        pin_self(options.spin_cpu);
      } catch (const Error& e) {
        errors[i] = e.what();
      }
      tids[i] = static_cast<pid_t>(::gettid());
      shared.ready.fetch_add(1);
      while (!shared.registered.load(std::memory_order_acquire)) std::this_thread::yield();
      while (!shared.go.load(std::memory_order_acquire)) cpu_relax();
      const abi::VcpuRunState& mine = records[options.first_vcpu + i];
      starts[i] = sample_self(mine);
      while (!shared.stop.load(std::memory_order_relaxed)) cpu_relax();
      ends[i] = sample_self(mine);
    });
  }

  // The reader: every change of a record it sees, how long after the
  // program stamped it, and in which state.
  struct Seen {
    std::uint64_t running = 0, preempted = 0, sleeping = 0;
  };
  std::vector<Seen> seen(options.threads);
  std::vector<double> latencies;
  std::uint64_t polls = 0;
  std::uint64_t discarded = 0;
  std::thread reader;
  if (options.reader_cpu >= 0) {
    latencies.reserve(1 << 20);
    reader = std::thread([&] {
      try {
        pin_self(options.reader_cpu);
      } catch (const Error& e) {
        errors[options.threads] = e.what();
      }
      std::vector<std::uint32_t> last(options.threads, 0);
      for (unsigned i = 0; i < options.threads; ++i)
        last[i] = __atomic_load_n(&records[options.first_vcpu + i].seq, __ATOMIC_ACQUIRE);
      // A change is timed only if this reader kept polling from its
      // previous look at the record to the moment it saw the change: if it
      // was itself preempted or interrupted in between (common on a loaded
      // host), the wait would measure the reader, not the page.
      std::uint64_t previous_poll = monotonic_ns();
      while (!shared.reader_stop.load(std::memory_order_relaxed)) {
        ++polls;
        std::uint64_t poll = monotonic_ns();
        for (unsigned i = 0; i < options.threads; ++i) {
          const abi::VcpuRunState& record = records[options.first_vcpu + i];
          std::uint32_t seq = __atomic_load_n(&record.seq, __ATOMIC_ACQUIRE);
          if (seq == last[i] || (seq & 1U)) continue;
          std::uint64_t now = monotonic_ns();
          abi::VcpuRunState copy = read_record(record);
          last[i] = copy.seq;
          if (now - previous_poll > kReaderGapNs) {
            ++discarded;
          } else if (copy.seq == seq && latencies.size() < latencies.capacity()) {
            latencies.push_back(static_cast<double>(static_cast<std::int64_t>(now - copy.state_since_ns)));
          }
          switch (static_cast<abi::RunState>(copy.state)) {
            case abi::RunState::kRunning: ++seen[i].running; break;
            case abi::RunState::kPreempted: ++seen[i].preempted; break;
            case abi::RunState::kSleeping: ++seen[i].sleeping; break;
            case abi::RunState::kUnknown: break;
          }
        }
        previous_poll = poll;
      }
    });
  }

  while (shared.ready.load() < options.threads) std::this_thread::yield();
  for (unsigned i = 0; i < options.threads; ++i) page.register_thread(tids[i], options.first_vcpu + i);
  ProgramStats stats_before = page.program_stats();
  shared.registered.store(true, std::memory_order_release);
  // Let every spinner get switched in at least once before the window opens.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  shared.go.store(true, std::memory_order_release);
  std::this_thread::sleep_for(options.duration);
  shared.stop.store(true, std::memory_order_relaxed);
  for (std::thread& t : spinners) t.join();
  shared.reader_stop.store(true, std::memory_order_relaxed);
  if (reader.joinable()) reader.join();
  ProgramStats stats_after = page.program_stats();
  for (unsigned i = 0; i < options.threads; ++i) page.unregister_thread(tids[i]);
  for (const std::string& error : errors)
    if (!error.empty()) fail_host("run_pinned: {}", error);

  PinnedRun run;
  for (unsigned i = 0; i < options.threads; ++i) {
    ThreadCounts counts;
    counts.tid = tids[i];
    counts.vcpu = options.first_vcpu + i;
    counts.page_preemptions = ends[i].record.preemptions - starts[i].record.preemptions;
    counts.page_sleeps = ends[i].record.sleeps - starts[i].record.sleeps;
    counts.page_runs = ends[i].record.runs - starts[i].record.runs;
    counts.page_anomalies = ends[i].record.anomalies - starts[i].record.anomalies;
    counts.page_preempted_ns = ends[i].record.preempted_ns - starts[i].record.preempted_ns;
    counts.involuntary = ends[i].involuntary - starts[i].involuntary;
    counts.voluntary = ends[i].voluntary - starts[i].voluntary;
    counts.seen_running = seen[i].running;
    counts.seen_preempted = seen[i].preempted;
    counts.seen_sleeping = seen[i].sleeping;
    run.threads.push_back(counts);
  }
  run.latency = summarize(latencies);
  run.latency_samples_ns = std::move(latencies);
  run.reader_polls = polls;
  run.latency_discarded = discarded;
  run.stats_delta = {stats_after.recursion_misses - stats_before.recursion_misses,
                     stats_after.run_count - stats_before.run_count,
                     stats_after.run_time_ns - stats_before.run_time_ns};
  return run;
}

double pingpong_ns(int cpu, unsigned round_trips, RunStatePage* page, bool register_threads) {
  int ping[2];
  int pong[2];
  if (::pipe2(ping, O_CLOEXEC) != 0) fail_host("pipe: {}", std::strerror(errno));
  UniqueFd ping_read(ping[0]), ping_write(ping[1]);
  if (::pipe2(pong, O_CLOEXEC) != 0) fail_host("pipe: {}", std::strerror(errno));
  UniqueFd pong_read(pong[0]), pong_write(pong[1]);

  std::atomic<pid_t> partner_tid{0};
  std::string partner_error;
  std::thread partner([&] {
    try {
      pin_self(cpu);
    } catch (const Error& e) {
      partner_error = e.what();
    }
    partner_tid.store(static_cast<pid_t>(::gettid()));
    char token = 0;
    for (unsigned i = 0; i < round_trips; ++i) {
      if (::read(ping_read.get(), &token, 1) != 1) break;
      if (::write(pong_write.get(), &token, 1) != 1) break;
    }
  });
  while (partner_tid.load() == 0) std::this_thread::yield();

  // The caller's own affinity is restored afterwards.
  cpu_set_t saved;
  CPU_ZERO(&saved);
  ::sched_getaffinity(0, sizeof(saved), &saved);
  pin_self(cpu);
  auto self = static_cast<pid_t>(::gettid());
  if (page != nullptr && register_threads) {
    page->register_thread(self, 0);
    page->register_thread(partner_tid.load(), 1);
  }
  char token = 1;
  std::uint64_t begin = monotonic_ns();
  for (unsigned i = 0; i < round_trips; ++i) {
    if (::write(ping_write.get(), &token, 1) != 1 || ::read(pong_read.get(), &token, 1) != 1) {
      partner.join();
      fail_host("ping-pong pipe failed: {}", std::strerror(errno));
    }
  }
  std::uint64_t elapsed = monotonic_ns() - begin;
  partner.join();
  if (page != nullptr && register_threads) {
    page->unregister_thread(self);
    page->unregister_thread(partner_tid.load());
  }
  ::sched_setaffinity(0, sizeof(saved), &saved);
  if (!partner_error.empty()) fail_host("{}", partner_error);
  return static_cast<double>(elapsed) / round_trips;
}

}  // namespace lockvisor::runstate::experiment
