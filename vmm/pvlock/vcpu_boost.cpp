#include "vmm/pvlock/vcpu_boost.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "vmm/util/error.h"

namespace lockvisor::pvlock {
namespace {

constexpr int kBoostFifoPriority = 1;
constexpr int kReverterFifoPriority = 2;  // above every boosted vCPU: the bound holds on a shared CPU
constexpr int kBoostNice = -20;

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

pid_t this_tid() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

int set_fifo(pid_t tid, int priority) {
  const sched_param param{priority};
  return ::sched_setscheduler(tid, priority > 0 ? SCHED_FIFO : SCHED_OTHER, &param);
}

// Whether this process may make a thread SCHED_FIFO / lower a nice value:
// tried on the calling thread and undone.
bool can_use(BoostMechanism mechanism, int* error) {
  if (mechanism == BoostMechanism::kFifo) {
    const int old_policy = ::sched_getscheduler(0);
    sched_param old_param{};
    ::sched_getparam(0, &old_param);
    if (set_fifo(0, kBoostFifoPriority) != 0) {
      *error = errno;
      return false;
    }
    ::sched_setscheduler(0, old_policy, &old_param);
    return true;
  }
  if (mechanism == BoostMechanism::kNice) {
    errno = 0;
    const int old_nice = ::getpriority(PRIO_PROCESS, static_cast<id_t>(this_tid()));
    if (::setpriority(PRIO_PROCESS, static_cast<id_t>(this_tid()), kBoostNice) != 0) {
      *error = errno;
      return false;
    }
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(this_tid()), old_nice);
    return true;
  }
  return true;
}

}  // namespace

BoostMechanism parse_boost_mechanism(std::string_view text) {
  if (text == "auto") return BoostMechanism::kAuto;
  if (text == "fifo") return BoostMechanism::kFifo;
  if (text == "nice") return BoostMechanism::kNice;
  if (text == "off") return BoostMechanism::kOff;
  fail("--boost '{}': expected auto, fifo, nice or off", text);
}

const char* boost_mechanism_name(BoostMechanism mechanism) {
  switch (mechanism) {
    case BoostMechanism::kAuto:
      return "auto";
    case BoostMechanism::kFifo:
      return "fifo";
    case BoostMechanism::kNice:
      return "nice";
    case BoostMechanism::kOff:
      return "off";
  }
  return "off";
}

BoostMechanism resolve_boost_mechanism(BoostMechanism requested, std::string* why) {
  int error = 0;
  if (requested == BoostMechanism::kAuto) {
    if (can_use(BoostMechanism::kFifo, &error)) {
      if (why) *why = "SCHED_FIFO permitted";
      return BoostMechanism::kFifo;
    }
    if (why) *why = std::string("SCHED_FIFO not permitted (") + std::strerror(error) + "): boosts are counted, not applied";
    return BoostMechanism::kOff;
  }
  if (!can_use(requested, &error))
    fail_host("--boost {}: {} needs CAP_SYS_NICE or {} ({})", boost_mechanism_name(requested),
              requested == BoostMechanism::kFifo ? "SCHED_FIFO" : "nice -20",
              requested == BoostMechanism::kFifo ? "RLIMIT_RTPRIO >= 1" : "RLIMIT_NICE >= 40", std::strerror(error));
  if (why) *why = requested == BoostMechanism::kOff ? "off" : "requested";
  return requested;
}

VcpuBooster::VcpuBooster(unsigned vcpus, BoostMechanism mechanism, std::chrono::nanoseconds bound, Observer observer)
    : mechanism_(mechanism), bound_(bound), observer_(std::move(observer)) {
  slots_.reserve(vcpus);
  for (unsigned i = 0; i < vcpus; ++i) slots_.push_back(std::make_unique<Slot>());
  if (mechanism_ == BoostMechanism::kFifo || mechanism_ == BoostMechanism::kNice) {
    reverter_ = std::thread([this] {
      // Best effort: without it the bound still holds wherever the reverter
      // gets a CPU of its own, and RT throttling bounds the rest.
      if (mechanism_ == BoostMechanism::kFifo) set_fifo(0, kReverterFifoPriority);
      reverter();
    });
  }
}

VcpuBooster::~VcpuBooster() { stop(); }

void VcpuBooster::attach(unsigned vcpu) {
  auto& tid = slots_[vcpu]->tid;
  if (tid.load(std::memory_order_relaxed) == 0) tid.store(this_tid(), std::memory_order_relaxed);
}

bool VcpuBooster::apply(pid_t tid, bool on) const {
  if (mechanism_ == BoostMechanism::kFifo) return set_fifo(tid, on ? kBoostFifoPriority : 0) == 0;
  if (mechanism_ == BoostMechanism::kNice)
    return ::setpriority(PRIO_PROCESS, static_cast<id_t>(tid), on ? kBoostNice : 0) == 0;
  return false;
}

bool VcpuBooster::boost(unsigned vcpu) {
  if (mechanism_ != BoostMechanism::kFifo && mechanism_ != BoostMechanism::kNice) return false;
  Slot& slot = *slots_[vcpu];
  const pid_t tid = slot.tid.load(std::memory_order_relaxed);
  if (tid == 0) return false;
  std::lock_guard lock(mutex_);
  if (stopping_) return false;
  const bool already = slot.deadline_ns.load(std::memory_order_relaxed) != 0;
  // A renewed boost extends the deadline: the target is still the one to run.
  slot.deadline_ns.store(now_ns() + static_cast<std::uint64_t>(bound_.count()), std::memory_order_release);
  if (!already && !apply(tid, true)) {
    slot.deadline_ns.store(0, std::memory_order_release);
    return false;
  }
  if (observer_) observer_(vcpu, false);
  wake_.notify_one();
  return true;
}

void VcpuBooster::end_locked(unsigned vcpu, bool expired) {
  Slot& slot = *slots_[vcpu];
  if (slot.deadline_ns.load(std::memory_order_relaxed) == 0) return;
  slot.deadline_ns.store(0, std::memory_order_release);
  apply(slot.tid.load(std::memory_order_relaxed), false);
  if (expired && observer_) observer_(vcpu, true);
}

void VcpuBooster::release(unsigned vcpu) {
  if (slots_[vcpu]->deadline_ns.load(std::memory_order_acquire) == 0) return;  // the common case: one load
  std::lock_guard lock(mutex_);
  end_locked(vcpu, false);
}

void VcpuBooster::stop() {
  {
    std::lock_guard lock(mutex_);
    if (!stopping_) {
      stopping_ = true;
      for (unsigned i = 0; i < slots_.size(); ++i) end_locked(i, false);
    }
  }
  wake_.notify_all();
  if (reverter_.joinable()) reverter_.join();
}

void VcpuBooster::reverter() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    const std::uint64_t now = now_ns();
    std::uint64_t next = 0;
    for (unsigned i = 0; i < slots_.size(); ++i) {
      const std::uint64_t deadline = slots_[i]->deadline_ns.load(std::memory_order_relaxed);
      if (deadline == 0) continue;
      if (deadline <= now)
        end_locked(i, true);
      else if (next == 0 || deadline < next)
        next = deadline;
    }
    if (next == 0)
      wake_.wait(lock);
    else
      wake_.wait_for(lock, std::chrono::nanoseconds(next - now));
  }
}

}  // namespace lockvisor::pvlock
