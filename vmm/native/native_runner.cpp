#include "vmm/native/native_runner.h"

#include <chrono>
#include <cmath>

#include "locks/registry.h"
#include "vmm/experiment/lock_name.h"
#include "vmm/host/cpu_set.h"
#include "vmm/util/error.h"

namespace lockvisor::native {

std::uint64_t host_lock_clock_khz() {
  static const std::uint64_t khz = [] {
    // Two CLOCK_MONOTONIC_RAW/lock-clock pairs ~20 ms apart. A pair is the
    // lock clock read between two monotonic reads, stamped at their middle;
    // of a few tries the pair whose monotonic reads lie closest together is
    // kept, so a preemption (or, under emulation, a translation) between
    // the reads does not skew the rate: the sleep's overshoot does not
    // matter either.
    struct Stamp {
      double ns;
      std::uint64_t ticks;
    };
    auto mono_ns = [] {
      timespec ts{};
      clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
      return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
    };
    auto stamp = [&mono_ns] {
      Stamp best{0, 0};
      double best_gap = 0;
      for (int i = 0; i < 5; ++i) {
        const double before = mono_ns();
        const std::uint64_t ticks = locks::read_lock_clock();
        const double after = mono_ns();
        if (i == 0 || after - before < best_gap) {
          best_gap = after - before;
          best = {(before + after) / 2, ticks};
        }
      }
      return best;
    };
    const Stamp s0 = stamp();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const Stamp s1 = stamp();
    return static_cast<std::uint64_t>(std::llround(static_cast<double>(s1.ticks - s0.ticks) / (s1.ns - s0.ns) * 1e6));
  }();
  return khz;
}

namespace detail {

std::mutex& run_mutex() {
  static std::mutex m;
  return m;
}

std::vector<int> thread_pcpus(const NativeRunConfig& config, unsigned i) {
  if (!config.affinity.empty()) return config.affinity.at(i);
  return host::thread_cpus(config.pcpus, i, config.spread);
}

void pin_self(const std::vector<int>& pcpus) {
  if (!pcpus.empty()) host::set_thread_affinity(pthread_self(), pcpus);
}

std::vector<int> self_affinity() { return host::thread_affinity(pthread_self()); }

void validate_params_and_cpus(const NativeRunConfig& config) {
  if (const abi::WorkloadLimit* l = abi::out_of_range(config.params); l != nullptr)
    fail("native run: {} {} is out of range {}..{}", l->name, config.params.*(l->field), l->min, l->max);
  if (const char* why = workloads::check_params(config.params)) fail("native run: {}", why);
  if (!config.pcpus.empty()) host::validate_cpus(config.pcpus);
  const auto n = static_cast<std::size_t>(config.params.cpus);
  if (!config.affinity.empty() && config.affinity.size() != n)
    fail("native run: {} thread affinities for {} threads", config.affinity.size(), n);
  if (!config.vcpu_node.empty() && config.vcpu_node.size() != n)
    fail("native run: {} thread nodes for {} threads", config.vcpu_node.size(), n);
  for (const auto& cpus : config.affinity) host::validate_cpus(cpus);
  for (const auto& spec : config.inject)
    if (spec.vcpu && *spec.vcpu >= n) fail("--inject '{}': the run has {} threads", inject::format_inject_spec(spec), n);
}

}  // namespace detail

void validate_native_config(const NativeRunConfig& config) {
  experiment::known_lock(config.lock);
  detail::validate_params_and_cpus(config);
}

std::vector<abi::WorkloadStats> run_native(const NativeRunConfig& config, std::vector<NativeThreadUsage>* usage) {
  validate_native_config(config);
  std::vector<abi::WorkloadStats> stats;
  locks::with_lock_type<BenchEnv>(config.lock.c_str(),
                                  [&]<class L>() { stats = run_native_with<BenchEnv, L, HostPlatform>(config, usage); });
  return stats;
}

}  // namespace lockvisor::native
