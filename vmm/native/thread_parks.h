// thread_parks.h: descheduling the host threads of a native run on purpose,
// the native form of a vCPU park (vmm/machine/vcpu_park.h) for --inject.
//
// A native thread runs the lock workload with no exit to stop it at, so a
// park is a signal. park(i, d) records when thread i's park ends and sends
// it kParkSignal; the handler sleeps (clock_nanosleep, async-signal-safe)
// until that end and returns. The thread stops between two instructions
// wherever it is -- holding the lock, spinning, or asleep in the Env's futex
// wait, which returns after the handler (EINTR: its waits are timed, so
// SA_RESTART does not restart them) as a spurious wake-up the lock re-checks;
// a kick sent meanwhile stays in the futex word and is consumed then, so
// none is lost -- as it does when the host scheduler takes its CPU. While the handler sleeps the thread's
// preempted flag is up (`show`: the lock Env's vcpu_is_preempted(), as the
// steal-time flag is for a parked vCPU).
//
// Invariants:
//   - Parks never overlap on one thread: a request that arrives while one is
//     on its way or in progress extends it to the later end; it is counted
//     as requested, not as another park (VcpuPark does the same).
//   - Only an armed thread is signalled: arm() (on the thread, before its
//     workload) unblocks the signal and then arms; disarm() (on the thread,
//     after it) blocks the signal and then disarms. A request racing with
//     disarm() sends a signal that stays pending and dies with the thread;
//     the handler never runs on a thread outside its workload.
//   - The owner keeps every armed thread joinable until it stops sending
//     (pthread_kill needs a thread that has not been joined).
//   - Counts are exact: `parks` is how many times the handler slept,
//     `parked_ns` the time it slept.
#pragma once
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

namespace lockvisor::native {

struct ThreadParkCounts {
  std::uint64_t requested = 0;  // park() calls accepted
  std::uint64_t parks = 0;      // times the thread slept through a park
  std::uint64_t parked_ns = 0;  // their total length
};

class ThreadParks {
 public:
  // `show(i, parked)` is called on thread i as its park starts and ends
  // (from the signal handler: it must be async-signal-safe, e.g. an atomic
  // store); may be null.
  using ShowParked = void (*)(unsigned thread, bool parked);
  ThreadParks(unsigned threads, ShowParked show);
  ~ThreadParks();
  ThreadParks(const ThreadParks&) = delete;
  ThreadParks& operator=(const ThreadParks&) = delete;

  // On thread i, before it runs anything a park may interrupt / after.
  void arm(unsigned i);
  void disarm(unsigned i);
  // Parks thread i for `duration` from now (any thread, thread i itself
  // included: then it has slept before this returns). False when thread i
  // is not armed: nothing was requested.
  bool park(unsigned i, std::chrono::nanoseconds duration);
  // Read after every thread has disarmed.
  ThreadParkCounts counts(unsigned i) const;
  unsigned threads() const { return threads_; }

  // The signal (a real-time one: queued apart from anything else).
  static int park_signal();

 private:
  struct Slot;
  static void on_signal(int);
  // The handler finds its thread's slot here (set by arm(), on the thread).
  static thread_local Slot* tls_slot_;
  static void serve(Slot& slot);

  unsigned threads_;
  ShowParked show_;
  std::unique_ptr<Slot[]> slots_;
};

}  // namespace lockvisor::native
