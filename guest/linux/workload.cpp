#include "guest/linux/workload.h"

#include <algorithm>
#include <cerrno>
#include <latch>
#include <memory>
#include <thread>

namespace lockvisor::linux_init {

Worker::Worker(unsigned index, const std::atomic<bool>& stop, unsigned sample_every, std::uint64_t seed)
    : index_(index), stop_(stop), sample_every_(sample_every) {
  // splitmix64 of (seed, index): distinct, never-zero xorshift states.
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  rng_ = (z ^ (z >> 31)) | 1;
  samples_.reserve(1024);
}

std::uint64_t Worker::random() {
  rng_ ^= rng_ >> 12;
  rng_ ^= rng_ << 25;
  rng_ ^= rng_ >> 27;
  return rng_ * 0x2545F4914F6CDD1Dull;
}

void Worker::fail(std::string reason) {
  if (!failure_) failure_ = "worker " + std::to_string(index_) + ": " + std::move(reason);
}

void Worker::record_sample(std::uint64_t ns) {
  ++samples_seen_;
  if (samples_.size() < kMaxSamples) {
    samples_.push_back(ns);
    return;
  }
  const std::uint64_t slot = random() % samples_seen_;
  if (slot < kMaxSamples) samples_[slot] = ns;
}

WorkloadResult run_workload(Workload& workload, unsigned workers, const Parameters& parameters) {
  std::atomic<bool> stop{false};
  std::atomic<bool> go{false};
  std::latch ready(static_cast<std::ptrdiff_t>(workers) + 1);
  std::vector<std::unique_ptr<Worker>> state;
  for (unsigned i = 0; i < workers; ++i)
    state.push_back(std::make_unique<Worker>(i, stop, parameters.sample_every, parameters.seed));

  std::vector<std::jthread> threads;
  // If creating a thread throws, release the ones already waiting (stopped
  // at once) before the jthreads join them on the way out.
  struct Release {
    std::atomic<bool>& stop;
    std::atomic<bool>& go;
    bool armed = true;
    ~Release() {
      if (!armed) return;
      stop.store(true);
      go.store(true);
      go.notify_all();
    }
  } release{stop, go};
  for (unsigned i = 0; i < workers; ++i) {
    threads.emplace_back([&, i] {
      ready.count_down();
      go.wait(false);
      if (!stop.load()) workload.run(*state[i]);
    });
  }
  ready.arrive_and_wait();
  const std::uint64_t start = monotonic_ns();
  go.store(true);
  go.notify_all();

  timespec left{static_cast<time_t>(parameters.duration_ms / 1000),
                static_cast<long>(parameters.duration_ms % 1000) * 1'000'000};
  while (::nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
  stop.store(true);
  release.armed = false;
  threads.clear();  // joins
  WorkloadResult result;
  result.elapsed_ns = monotonic_ns() - start;
  for (const auto& w : state) {
    result.per_thread_ops.push_back(w->ops());
    result.latency_ns.insert(result.latency_ns.end(), w->samples().begin(), w->samples().end());
    if (w->failure()) result.errors.push_back(*w->failure());
  }
  return result;
}

LatencyPercentiles latency_percentiles(std::vector<std::uint64_t> samples) {
  LatencyPercentiles out;
  if (samples.empty()) return out;
  std::sort(samples.begin(), samples.end());
  const std::uint64_t n = samples.size();
  const auto at_permille = [&](std::uint64_t permille) {
    const std::uint64_t rank = std::max<std::uint64_t>(1, (permille * n + 999) / 1000);
    return samples[rank - 1];
  };
  out.samples = n;
  out.p50 = at_permille(500);
  out.p90 = at_permille(900);
  out.p99 = at_permille(990);
  out.p999 = at_permille(999);
  out.max = samples.back();
  // Sum in 128 bits: 2^20 samples of up to 2^64 ns cannot overflow it.
  unsigned __int128 sum = 0;
  for (const std::uint64_t s : samples) sum += s;
  out.mean = static_cast<std::uint64_t>(sum / n);
  return out;
}

}  // namespace lockvisor::linux_init
