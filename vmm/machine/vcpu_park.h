// Holding a vCPU thread out of KVM_RUN on the VMM's own initiative: the
// preemption injector's "descheduled for D µs" and the control socket's
// pause/resume. To the guest both look exactly like the host scheduler
// taking the vCPU's CPU away: the vCPU stops between two instructions, its
// TSC keeps running, and nothing in guest memory says why.
//
// How a park happens. Any thread calls inject() or pause() and then
// interrupts the vCPU (VcpuRunner::inject_preemption does both): KVM_RUN
// returns EINTR, and before entering the guest again the vCPU thread calls
// wait_while_parked(), which sleeps until the park ends. A vCPU halted in
// the PV backend (its kick latch) parks when it next returns to its loop, so
// a park never swallows or delays a kick's bookkeeping.
//
// Invariants:
//   - Every wait ends: stop() wakes a parked thread for good, and no later
//     park blocks (sticky, like the backends' kStop).
//   - Injected preemptions never overlap on one vCPU: a request that arrives
//     while one is pending or running extends it to the later end, and is
//     counted as requested but not as a separate park.
//   - A pause holds until resume() or stop(); an injected preemption that
//     ends during a pause simply ends inside it.
//   - Counts are exact: `parks` is the number of times the thread actually
//     slept for an injected preemption, `parked_ns` their total length.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>

namespace lockvisor::machine {

enum class ParkCause { kInjected, kPaused };
const char* park_cause_name(ParkCause cause);

// One interval the vCPU thread spent parked (for the timeline).
struct ParkInterval {
  ParkCause cause = ParkCause::kInjected;
  std::chrono::steady_clock::time_point begin;
  std::chrono::steady_clock::time_point end;
};

struct ParkCounts {
  std::uint64_t requested = 0;   // inject() calls accepted (before stop)
  std::uint64_t parks = 0;       // injected preemptions the thread actually slept through
  std::uint64_t parked_ns = 0;   // their total length
  std::uint64_t pauses = 0;      // pause() ... resume() spans the thread slept through
  std::uint64_t paused_ns = 0;
};

class VcpuPark {
 public:
  using Clock = std::chrono::steady_clock;

  // Requests an injected preemption of `duration` from now. False after
  // stop() (nothing was requested).
  bool inject(std::chrono::nanoseconds duration);
  // Holds the vCPU until resume(). False after stop(). Idempotent.
  bool pause();
  void resume();
  bool paused() const;
  // Whether the vCPU thread is held out of the guest right now, sleeping
  // in wait_while_parked() (paused() says a pause was asked for; a vCPU
  // takes it at its next exit, or when a halt it is in ends).
  bool held() const;
  // Ends every present and future park.
  void stop();

  // Cheap check for the vCPU loop: true when wait_while_parked() has
  // something to do.
  bool pending() const { return pending_.load(std::memory_order_acquire); }
  // vCPU thread only. Sleeps while parked (an injected preemption not yet
  // over, or a pause) and returns what it slept through, each interval once
  // (an injected preemption followed by a pause: the first interval; the
  // next call returns the rest). nullopt: nothing was pending.
  std::optional<ParkInterval> wait_while_parked();

  ParkCounts counts() const;

 private:
  void update_pending_locked();

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::atomic<bool> pending_{false};
  bool stopped_ = false;
  bool paused_ = false;
  bool held_ = false;
  std::optional<Clock::time_point> injected_until_;
  ParkCounts counts_;
};

}  // namespace lockvisor::machine
