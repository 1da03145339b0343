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
// began. The time bound is enforced by a reverter thread that is itself
// SCHED_FIFO at priority 2 (with fifo), so a boosted vCPU spinning at CPL3
// without exits cannot keep it from running on a shared CPU. The kernel's
// RT throttling (sched_rt_runtime_us) is a second, coarser safety net.
//
// Threads are learned lazily: a vCPU's thread id is recorded the first time
// that vCPU calls into the backend (attach()); a vCPU never seen there cannot
// be boosted (counted as a boost that found no thread).
#pragma once
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
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
  // `on_boost(vcpu, expired)`: called when a boost begins (expired = false) and
  // when the time bound ends one (expired = true); for the counters.
  using Observer = std::function<void(unsigned vcpu, bool expired)>;
  VcpuBooster(unsigned vcpus, BoostMechanism mechanism, std::chrono::nanoseconds bound, Observer observer);
  ~VcpuBooster();
  VcpuBooster(const VcpuBooster&) = delete;
  VcpuBooster& operator=(const VcpuBooster&) = delete;

  BoostMechanism mechanism() const { return mechanism_; }
  // Records the calling thread as vCPU `vcpu`'s (cheap after the first call).
  void attach(unsigned vcpu);
  // Boosts vCPU `vcpu` (or extends its boost); false when nothing was done
  // (mechanism off, or its thread is not known yet).
  bool boost(unsigned vcpu);
  // Ends vCPU `vcpu`'s boost, if any (cheap when there is none).
  void release(unsigned vcpu);
  // Ends every boost and the reverter thread; idempotent.
  void stop();
  bool boosted(unsigned vcpu) const { return slots_[vcpu]->deadline_ns.load(std::memory_order_acquire) != 0; }

 private:
  struct Slot {
    std::atomic<pid_t> tid{0};
    std::atomic<std::uint64_t> deadline_ns{0};  // 0: not boosted
  };
  bool apply(pid_t tid, bool on) const;
  void end_locked(unsigned vcpu, bool expired);
  void reverter();

  BoostMechanism mechanism_;
  std::chrono::nanoseconds bound_;
  Observer observer_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::mutex mutex_;  // serialises policy changes and the reverter's scan
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread reverter_;  // joined by stop()
};

}  // namespace lockvisor::pvlock
