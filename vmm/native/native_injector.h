// native_injector.h: --inject on host threads (docs/preemption.md, "Natively").
//
//   periodic/random  one thread of its own sleeps until the next due park of
//                    any (schedule, thread) and requests it (ThreadParks);
//                    due times are absolute (a late wake-up does not shift
//                    the later ones) and each (schedule, thread) draws from
//                    the same seeded stream as a vCPU's in a VM
//                    (schedule_math.h), so one seed gives the same schedule;
//   holder           the thread that has just acquired the targeted lock
//                    parks itself when abi::preempt_point_chosen() picks the
//                    acquisition -- the choice a guest makes, so one seed
//                    picks the same acquisitions natively and in a VM.
// Waiter schedules need the guest's lock probe (first waiter behind the
// holder) and are refused natively before anything runs.
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
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "lockvisor/abi/lock_probe.h"
#include "vmm/inject/inject_spec.h"
#include "vmm/native/thread_parks.h"

namespace lockvisor::native {

struct NativeInjectCounts {
  std::uint64_t count = 0;  // parks requested and accepted
  std::uint64_t ns = 0;     // their requested length
  std::uint64_t events = 0;  // holder: acquisitions of the targeted lock seen
};

class NativeInjector {
 public:
  // `specs`: validated, no waiter schedule; `run_seed`: --seed (a spec's
  // seed= wins, as in a VM).
  NativeInjector(const std::vector<inject::InjectSpec>& specs, std::uint64_t run_seed, ThreadParks& parks);
  ~NativeInjector();
  NativeInjector(const NativeInjector&) = delete;
  NativeInjector& operator=(const NativeInjector&) = delete;

  void start();
  void stop();

  // On thread `thread` right after it acquired lock slot `lock` (the
  // workload's on_lock_acquired): a holder schedule's preemption point.
  void on_acquired(unsigned thread, unsigned lock);
  bool has_holder() const { return holder_.has_value(); }

  // Per thread, by inject::InjectKind (kWaiter stays zero).
  const std::array<NativeInjectCounts, inject::kInjectKinds>& counts(unsigned thread) const {
    return counts_.at(thread).kinds;
  }
  // Which kinds this run has (the report lists those).
  bool has_kind(inject::InjectKind kind) const { return has_kind_[static_cast<unsigned>(kind)]; }
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

  ThreadParks& parks_;
  const std::vector<inject::InjectSpec> specs_;  // timed_ points into it
  std::vector<Timed> timed_;
  std::optional<abi::LockProbeConfig> holder_;  // seed and the holder target
  std::vector<ThreadCounts> counts_;
  bool has_kind_[inject::kInjectKinds] = {};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::chrono::nanoseconds behind_{0};
  std::thread thread_;
};

}  // namespace lockvisor::native
