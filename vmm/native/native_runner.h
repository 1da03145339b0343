// native_runner.h: the native baseline -- the guest's lock workloads
// (guest/workloads/workloads.h), run by host threads instead of vCPUs.
//
// params.cpus threads, each bound to CPU index i of the Env and pinned like
// the VMM pins vCPUs:
//   pcpus empty     unpinned (the host scheduler decides);
//   spread = true   thread i on pcpus[i % pcpus.size()] alone;
//   spread = false  every thread on the whole set ("float");
//   affinity given  thread i on affinity[i] (the --vnuma pinning: its
//                   node's CPUs, vmm/machine/vnuma.h vnuma_affinity()).
// With `vcpu_node` (--vnuma) the Env's numa_node(i) is thread i's node, so
// the NUMA-aware locks and the workload's handoff counts read the topology
// as a guest's do; without it every thread is on node 0.
// Every thread runs run_workload() with the same WorkloadShared (fresh,
// zeroed) and returns its WorkloadStats, exactly as a vCPU would.  The lock
// Env is BenchEnv (vmm/native/native_env.h): futex wait/kick, plain `pause`.
//
// With `inject` (--inject; native_injector.h) the threads are parked on
// that schedule (thread_parks.h): a park is a signal whose handler sleeps,
// and the Env's vcpu_is_preempted() says so while it lasts, as the
// steal-time flag does for a parked vCPU. Holder and waiter schedules run
// the guest's lock-probe rules on the threads (the workload's lock hooks and
// the Env's spin hook).
//
// Runs are serialised (the Env's state is static): concurrent calls to
// run_native wait for each other.
#pragma once

#include <pthread.h>
#include <sys/resource.h>
#include <time.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <exception>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "lockvisor/abi/workload.h"
#include "vmm/inject/inject_spec.h"
#include "vmm/metrics/thread_usage.h"
#include "vmm/native/host_platform.h"
#include "vmm/native/native_env.h"
#include "vmm/native/native_injector.h"
#include "vmm/native/thread_parks.h"
#include "workloads/shared_state.h"
#include "workloads/workloads.h"

namespace lockvisor::native {

struct NativeRunConfig {
  std::string lock;             // registry name (locks/registry.h)
  abi::WorkloadParams params{};  // params.cpus = number of threads
  std::vector<int> pcpus;       // host CPUs; empty = unpinned
  bool spread = true;           // true: thread i on pcpus[i % n]; false: all on the set
  std::vector<std::vector<int>> affinity;  // per thread, overrides pcpus/spread; empty: none
  std::vector<unsigned> vcpu_node;         // per thread, its NUMA node; empty: one node
  std::vector<inject::InjectSpec> inject;  // validated --inject schedules; empty: none
  std::uint64_t inject_seed = 0;           // --seed, for the schedules without their own
};

// What --inject did to one thread.
struct NativeThreadInjected {
  // How far behind its timed schedule the run's injector was at the end
  // (NativeInjector::behind): the same in every thread's record.
  std::uint64_t injector_behind_ns = 0;
  ThreadParkCounts park;  // requests, parks slept through, time parked
  // By inject::InjectKind (kinds the run has no schedule of stay zero).
  std::array<NativeInjectCounts, inject::kInjectKinds> kinds{};
};

// Host-side cost of one thread, measured around its run_workload() call
// (so it includes the barrier waits), and over the measured window only
// (between the workload's window marks, like a vCPU thread's).
struct NativeThreadUsage {
  unsigned cpu = 0;                        // the thread's CPU index (== stats[i].cpu)
  double cpu_seconds = 0;                  // CLOCK_THREAD_CPUTIME_ID
  std::uint64_t involuntary_switches = 0;  // getrusage(RUSAGE_THREAD) ru_nivcsw: preempted
  std::uint64_t voluntary_switches = 0;    // ru_nvcsw: blocked (futex waits, yields)
  std::vector<int> affinity;               // the CPUs it was allowed to run on
  std::optional<metrics::ThreadUsage> window;  // between the window marks
  std::optional<NativeThreadInjected> injected;  // with --inject
};

// Checks the configuration (lock name, parameters, CPUs, schedules); throws
// lockvisor::Error with a one-line message.
void validate_native_config(const NativeRunConfig& config);

// Runs the workload; one stats record per thread, in CPU-index order.  If
// `usage` is given it receives one NativeThreadUsage per thread, same order.
// Throws lockvisor::Error for an unknown lock or invalid configuration.
std::vector<abi::WorkloadStats> run_native(const NativeRunConfig& config,
                                           std::vector<NativeThreadUsage>* usage = nullptr);

// ---- the typed core (also for tests: locks outside the registry, other Envs)

// Host threads running a workload cannot be stopped mid-run: the workload
// loops on the TSC until its deadline or iteration count, with no wait that
// could be cut short. While this count is non-zero, the lockvisor command's
// signal watcher (StopSignals, vmm/machine/stop_signals.h; main() hands it this count) ends the process at
// once on SIGINT/SIGTERM/SIGHUP (one line, exit 130) instead of waiting for
// the run. Every other wait of a native run is bounded: the start/end
// barriers by the other threads, BenchEnv::wait() by its futex timeout.
inline std::atomic<unsigned>& runs_in_progress() {
  static std::atomic<unsigned> runs{0};
  return runs;
}

namespace detail {
struct RunInProgress {
  RunInProgress() { runs_in_progress().fetch_add(1); }
  ~RunInProgress() { runs_in_progress().fetch_sub(1); }
  RunInProgress(const RunInProgress&) = delete;
  RunInProgress& operator=(const RunInProgress&) = delete;
};

std::mutex& run_mutex();
// Pinning for thread i (empty: unpinned).
std::vector<int> thread_pcpus(const NativeRunConfig& config, unsigned i);
// Pins the calling thread; throws lockvisor::Error.
void pin_self(const std::vector<int>& pcpus);
std::vector<int> self_affinity();

// The samples a thread takes at its window marks (set per thread by the runner).
struct WindowSamples {
  std::optional<metrics::ThreadUsage> start, end;
};
inline thread_local WindowSamples* tls_window = nullptr;
// The run's injector on a thread of a run with a holder or waiter schedule
// (the lock probe's hooks report to it), else null.
inline thread_local NativeInjector* tls_probe = nullptr;
inline thread_local unsigned tls_thread = 0;

// Platform P plus the window-mark hook (workloads/workloads.h): the thread
// samples its own usage at each edge, as a vCPU thread does at the guest's;
// and the lock hooks of the probe (one predictable branch each when off).
template <class P>
struct MarkedPlatform : P {
  static void window_mark(std::uint64_t edge) {
    if (tls_window == nullptr) return;
    (edge == abi::kWindowStart ? tls_window->start : tls_window->end) = metrics::sample_thread_usage();
  }
  static void on_lock_arrive(unsigned lock, std::uint64_t) {
    if (tls_probe != nullptr) [[unlikely]]
      tls_probe->on_arrive(tls_thread, lock);
  }
  static void on_lock_acquired(unsigned lock, std::uint64_t, std::uint64_t) {
    if (tls_probe != nullptr) [[unlikely]]
      tls_probe->on_acquired(tls_thread, lock);
  }
  static void on_lock_release(unsigned lock) {
    if (tls_probe != nullptr) [[unlikely]]
      tls_probe->on_release(tls_thread, lock);
  }
};
// The Env's spin hook (NativeEnvT::set_spin_hook): a spin iteration or halt
// inside lock() on a thread of a run with a probe.
inline void probe_spin() {
  if (tls_probe != nullptr) tls_probe->on_spin(tls_thread);
}

// The parks' preempted flag, on the Env when it has one.
template <class Env>
ThreadParks::ShowParked show_parked_for() {
  if constexpr (requires { Env::set_preempted(0u, true); })
    return [](unsigned thread, bool parked) { Env::set_preempted(thread, parked); };
  else
    return nullptr;
}
// Throws lockvisor::Error if the parameters are invalid (lock name not checked).
void validate_params_and_cpus(const NativeRunConfig& config);
}  // namespace detail

// Runs `Lock` (instantiated on Env) with Env and Platform.  Env needs the
// harness members of NativeEnvT (bind_cpu, set_nr_cpus, reset).  `shared`:
// a caller-owned zeroed WorkloadShared to inspect afterwards, or nullptr.
template <class Env, class Lock, class Platform = HostPlatform>
std::vector<abi::WorkloadStats> run_native_with(const NativeRunConfig& config,
                                                std::vector<NativeThreadUsage>* usage = nullptr,
                                                workloads::WorkloadShared<Lock>* shared = nullptr) {
  detail::validate_params_and_cpus(config);
  const abi::WorkloadParams& p = config.params;
  const unsigned n = static_cast<unsigned>(p.cpus);

  std::unique_ptr<workloads::WorkloadShared<Lock>> owned;
  if (shared == nullptr) {
    owned = std::make_unique<workloads::WorkloadShared<Lock>>();  // value-initialised: all zero
    shared = owned.get();
  }
  std::vector<abi::WorkloadStats> stats(n);
  std::vector<NativeThreadUsage> use(n);
  std::vector<std::exception_ptr> errors(n);
  (void)Platform::tsc_khz();  // calibrate before the threads start

  std::lock_guard<std::mutex> guard(detail::run_mutex());
  const detail::RunInProgress in_progress;  // a stop signal now ends the process (see above)
  Env::reset();
  Env::set_nr_cpus(n);
  if constexpr (requires { Env::set_numa_map(config.vcpu_node); }) Env::set_numa_map(config.vcpu_node);
  // --inject: the parks and their schedules. The injector stops before
  // any thread is joined (ThreadParks signals joinable threads only).
  std::optional<ThreadParks> parks;
  std::optional<NativeInjector> injector;
  if (!config.inject.empty()) {
    parks.emplace(n, detail::show_parked_for<Env>());
    injector.emplace(config.inject, config.inject_seed, *parks);
  }
  const bool probing = injector && injector->has_probe();
  if constexpr (requires { Env::set_spin_hook(&detail::probe_spin); })
    Env::set_spin_hook(probing ? &detail::probe_spin : nullptr);
  // The schedules start when every thread can be parked (a request to a
  // thread not yet armed would be dropped).
  std::latch armed(n), finished(n);
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (unsigned i = 0; i < n; i++) {
    threads.emplace_back([&, i] {
      // A pinning failure must not strand the others at the start barrier:
      // remember it, run anyway, report after the join.
      try {
        detail::pin_self(detail::thread_pcpus(config, i));
        use[i].affinity = detail::self_affinity();
      } catch (...) {
        errors[i] = std::current_exception();
      }
      Env::bind_cpu(static_cast<int>(i));
      detail::tls_thread = i;
      if (parks) parks->arm(i);
      armed.count_down();
      if (probing) detail::tls_probe = &*injector;
      timespec c0{}, c1{};
      rusage r0{}, r1{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
      getrusage(RUSAGE_THREAD, &r0);
      detail::WindowSamples window;
      detail::tls_window = &window;
      workloads::run_workload<Env, Lock, detail::MarkedPlatform<Platform>>(p, *shared, i, stats[i]);
      detail::tls_window = nullptr;
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
      getrusage(RUSAGE_THREAD, &r1);
      use[i].cpu = i;
      use[i].cpu_seconds = static_cast<double>(c1.tv_sec - c0.tv_sec) + 1e-9 * static_cast<double>(c1.tv_nsec - c0.tv_nsec);
      use[i].involuntary_switches = static_cast<std::uint64_t>(r1.ru_nivcsw - r0.ru_nivcsw);
      use[i].voluntary_switches = static_cast<std::uint64_t>(r1.ru_nvcsw - r0.ru_nvcsw);
      if (window.start && window.end) use[i].window = metrics::usage_between(*window.start, *window.end);
      detail::tls_probe = nullptr;
      if (parks) parks->disarm(i);
      finished.count_down();
    });
  }
  if (injector) {
    armed.wait();
    injector->start();
  }
  finished.wait();
  if (injector) {
    injector->stop();
    for (unsigned i = 0; i < n; i++) {
      NativeThreadInjected& in = use[i].injected.emplace();
      in.injector_behind_ns = static_cast<std::uint64_t>(injector->behind().count());
      in.park = parks->counts(i);
      in.kinds = injector->counts(i);
    }
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  if (usage != nullptr) *usage = std::move(use);
  return stats;
}

}  // namespace lockvisor::native
