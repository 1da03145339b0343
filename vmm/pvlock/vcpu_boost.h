// Boosting a vCPU thread: "run this vCPU next on its host CPU, and keep that
// preference until it releases or one host time slice has passed" — the host
// half of YIELD_TO (hypercall 11, KVM's KVM_HC_SCHED_YIELD numbering) and of
// --kick-boost (docs/boost.md).
//
// Mechanisms (--boost):
//   fifo  the target thread becomes SCHED_FIFO (priority 1) for the boost: it
//         preempts whatever CFS task runs on its CPU at once and keeps the CPU
//         until it blocks or the boost ends. Needs CAP_SYS_NICE (or
//         RLIMIT_RTPRIO >= 1). The one mechanism that holds "run next" for a
//         whole slice rather than one scheduling decision.
//   nice  the target thread gets nice -20 for the boost (CFS weight 88761 vs
//         1024): it wins most of its CPU but is not guaranteed to run next.
//         Lowering a nice value also needs CAP_SYS_NICE (or RLIMIT_NICE).
//   off   YIELD_TO and --kick-boost are counted, nothing changes.
// Chosen by measurement (docs/boost.md): fifo.
//
// A boost ends at the earliest of: the target's own next halt, kick or
// YIELD_TO (release(), called on the target's thread: it is done with the
// CPU it was given), or `bound` (default 4 ms, one slice at HZ=250) after it
// began. Asking again does not extend a boost, and after one that the bound
// ended the vCPU cannot be boosted for another `bound`: a guest cannot keep a
// thread real-time by asking over and over (at most half of the time).
//
// One thread, the booster, makes every policy change; boost() and release()
// only post a request and wake it. It runs SCHED_FIFO at priority 2 (with
// fifo), above every boosted vCPU, so neither the time bound nor a release can
// be held up by the boosted thread it concerns. (A first version changed the
// policy in the caller, under a lock: a caller sharing the target's CPU was
// preempted by the target it had just boosted, before arming the timer, and
// the measured boosts lasted 40-90 ms instead of 4 — until RT throttling let
// the caller run again.) The kernel's RT throttling (sched_rt_runtime_us)
// stays a second, coarser safety net.
//
// Threads are learned lazily: a vCPU's thread id is recorded the first time
// that vCPU calls into the backend (attach()); a vCPU never seen there cannot
// be boosted.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace lockvisor::pvlock {

enum class BoostMechanism { kAuto, kFifo, kNice, kOff };

BoostMechanism parse_boost_mechanism(std::string_view text);  // throws a usage Error
const char* boost_mechanism_name(BoostMechanism mechanism);

// kAuto resolves to kFifo when this process may use SCHED_FIFO, else kOff;
// kFifo/kNice without the privilege fail (host error, exit 6) with one line.
// `why` gets what was decided and why (for the report).
BoostMechanism resolve_boost_mechanism(BoostMechanism requested, std::string* why = nullptr);

class VcpuBooster {
 public:
  // `observer(vcpu, expired)`: called on the booster thread when a boost
  // begins (expired = false) and when the time bound ends one (expired = true).
  using Observer = std::function<void(unsigned vcpu, bool expired)>;
  VcpuBooster(unsigned vcpus, BoostMechanism mechanism, std::chrono::nanoseconds bound, Observer observer);
  ~VcpuBooster();
  VcpuBooster(const VcpuBooster&) = delete;
  VcpuBooster& operator=(const VcpuBooster&) = delete;

  BoostMechanism mechanism() const { return mechanism_; }
  // Records the calling thread as vCPU `vcpu`'s (cheap after the first call);
  // the first call of all starts the booster thread.
  void attach(unsigned vcpu);
  // Asks for vCPU `vcpu` to be boosted; false when it cannot be (mechanism
  // off, its thread not known yet, stopping). The booster applies it at once
  // unless the vCPU is boosted already or cooling down.
  bool boost(unsigned vcpu);
  // Ends vCPU `vcpu`'s boost, if any (one load when there is none).
  void release(unsigned vcpu);
  // Ends every boost and the booster thread; idempotent.
  void stop();
  // Whether the booster has vCPU `vcpu` boosted right now.
  bool boosted(unsigned vcpu) const { return slots_[vcpu]->boosted.load(std::memory_order_acquire); }

 private:
  enum Request : std::uint32_t { kNone, kBoost, kRelease };
  struct Slot {
    std::atomic<pid_t> tid{0};
    std::atomic<std::uint32_t> request{kNone};  // the latest wish, taken by the booster
    std::atomic<bool> boosted{false};           // written by the booster
    std::uint64_t deadline_ns = 0;              // booster thread only
    std::uint64_t cooldown_until_ns = 0;        // booster thread only
  };
  bool apply(pid_t tid, bool on) const;
  void post(Slot& slot, Request request);
  void end(unsigned vcpu, bool expired, std::uint64_t now);
  void run();

  BoostMechanism mechanism_;
  std::chrono::nanoseconds bound_;
  Observer observer_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::atomic<std::uint32_t> wake_{0};  // futex word: bumped by every request
  std::atomic<bool> stopping_{false};
  std::mutex start_mutex_;          // guards booster_'s start and join
  std::atomic<bool> started_{false};
  std::thread booster_;  // started by the first attach(), joined by stop()
};

}  // namespace lockvisor::pvlock
