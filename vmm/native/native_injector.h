// native_injector.h: --inject on host threads (docs/preemption.md, "Natively").
//
//   periodic/random  one thread of its own sleeps until the next due park of
//                    any (schedule, thread) and requests it (ThreadParks);
//                    due times are absolute (a late wake-up does not shift
//                    the later ones) and each (schedule, thread) draws from
//                    the same seeded stream as a vCPU's in a VM
//                    (schedule_math.h), so one seed gives the same schedule;
//   holder/waiter    the lock probe's rules (workloads/lock_probe_rules.h,
//                    the guest's own) run on the thread itself: the
//                    workload's lock hooks (arrive, acquired, release) and
//                    the lock Env's spin/wait hook report to it, and at a
//                    point abi::preempt_point_chosen() picks the thread
//                    parks itself there -- so one seed picks the same
//                    acquisitions (holder) and first-waiter events (waiter)
//                    natively and in a VM. Its records live in a probe area
//                    of the injector's own.
//
// The injector thread is not pinned: it wakes briefly at each due time on
// whichever CPU the host gives it, as the VMM's monitor thread does.
//
// Lifetime: start() after every workload thread exists, stop() before any
// is joined (ThreadParks' pthread_kill needs them joinable). Counts are read
// after stop() and after every workload thread has finished.
#pragma once
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "lockvisor/abi/lock_probe.h"
#include "vmm/inject/inject_spec.h"
#include "vmm/native/thread_parks.h"
#include "workloads/lock_probe_rules.h"

namespace lockvisor::native {

struct NativeInjectCounts {
  std::uint64_t count = 0;   // parks requested and accepted
  std::uint64_t ns = 0;      // their requested length
  std::uint64_t events = 0;  // holder/waiter: eligible events seen (the probe record's)
  std::uint64_t points = 0;  // holder/waiter: of them, chosen as preemption points
};

class NativeInjector {
 public:
  // `specs`: validated; `run_seed`: --seed (a spec's seed= wins, as in a
  // VM).
  NativeInjector(const std::vector<inject::InjectSpec>& specs, std::uint64_t run_seed, ThreadParks& parks);
  ~NativeInjector();
  NativeInjector(const NativeInjector&) = delete;
  NativeInjector& operator=(const NativeInjector&) = delete;

  void start();
  void stop();

  // The lock probe's hooks, on thread `thread` (only with a holder or
  // waiter schedule: has_probe()): it arrives at lock slot `lock`, has
  // acquired it, has released it; one spin iteration or halt inside lock().
  bool has_probe() const { return probe_.has_value(); }
  void on_arrive(unsigned thread, unsigned lock);
  void on_acquired(unsigned thread, unsigned lock);
  void on_release(unsigned thread, unsigned lock);
  void on_spin(unsigned thread);

  // Per thread, by inject::InjectKind; read after the threads finished.
  std::array<NativeInjectCounts, inject::kInjectKinds> counts(unsigned thread) const;
  // How far behind its timed schedule the injector was when it stopped (0:
  // on time). The injector thread competes with the run's threads for
  // CPUs: with hundreds of threads spinning on a few CPUs it falls behind,
  // and the counts say what was sent, not what was due.
  std::chrono::nanoseconds behind() const { return behind_; }

 private:
  struct Timed;
  struct alignas(64) ThreadCounts {
    std::array<NativeInjectCounts, inject::kInjectKinds> kinds;
  };
  void loop();
  void park_at(unsigned thread, const workloads::probe::Point& point);

  ThreadParks& parks_;
  const std::vector<inject::InjectSpec> specs_;  // timed_ points into it
  std::vector<Timed> timed_;
  std::optional<abi::LockProbeConfig> probe_;   // seed and the holder/waiter targets
  std::unique_ptr<abi::LockProbeArea> area_;    // the threads' probe records
  std::vector<ThreadCounts> counts_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::chrono::nanoseconds behind_{0};
  std::thread thread_;
};

}  // namespace lockvisor::native
