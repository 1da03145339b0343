#include "vmm/pvlock/vcpu_boost.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <system_error>

#include "vmm/util/error.h"
#include "vmm/util/monotonic_clock.h"

namespace lockvisor::pvlock {
namespace {

constexpr int kBoostFifoPriority = 1;
constexpr int kReverterFifoPriority = 2;  // above every boosted vCPU: the bound holds on a shared CPU
constexpr int kBoostNice = -20;

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
}

VcpuBooster::~VcpuBooster() { stop(); }

// The booster thread starts with the first attach(), on a vCPU thread that
// has entered the backend: not on the way to the first guest instruction,
// and before any boost can be asked for (boost() needs an attached target).
void VcpuBooster::attach(unsigned vcpu) {
  auto& tid = slots_[vcpu]->tid;
  if (tid.load(std::memory_order_relaxed) != 0) return;
  // Started before the tid is known: a boost of this vCPU never finds an
  // attached target without a booster.
  if ((mechanism_ == BoostMechanism::kFifo || mechanism_ == BoostMechanism::kNice) &&
      !started_.load(std::memory_order_acquire)) {
    std::lock_guard lock(start_mutex_);
    if (!started_.load(std::memory_order_relaxed) && !stopping_.load()) {
      try {
        booster_ = std::thread([this] {
          // Best effort: without it the bound still holds wherever the booster
          // gets a CPU of its own, and RT throttling bounds the rest.
          if (mechanism_ == BoostMechanism::kFifo) set_fifo(0, kReverterFifoPriority);
          run();
        });
        started_.store(true, std::memory_order_release);
      } catch (const std::system_error&) {
        // No thread (no memory for its stack, a thread limit): boosts are
        // refused from now on, as with --boost off; the vCPU runs on.
        stopping_.store(true);
      }
    }
  }
  tid.store(this_tid(), std::memory_order_release);
}

bool VcpuBooster::apply(pid_t tid, bool on) const {
  if (mechanism_ == BoostMechanism::kFifo) return set_fifo(tid, on ? kBoostFifoPriority : 0) == 0;
  if (mechanism_ == BoostMechanism::kNice)
    return ::setpriority(PRIO_PROCESS, static_cast<id_t>(tid), on ? kBoostNice : 0) == 0;
  return false;
}

void VcpuBooster::post(Slot& slot, Request request) {
  slot.request.store(request, std::memory_order_release);
  wake_.fetch_add(1, std::memory_order_acq_rel);
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&wake_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

bool VcpuBooster::boost(unsigned vcpu) {
  Slot& slot = *slots_[vcpu];
  // An attached target (acquire) means a started booster (attach()).
  if (slot.tid.load(std::memory_order_acquire) == 0) return false;
  if (!started_.load(std::memory_order_relaxed) || stopping_.load(std::memory_order_relaxed)) return false;
  post(slot, kBoost);
  return true;
}

void VcpuBooster::release(unsigned vcpu) {
  Slot& slot = *slots_[vcpu];
  // The common case, nothing to release: one or two loads.
  if (!slot.boosted.load(std::memory_order_acquire) && slot.request.load(std::memory_order_relaxed) != kBoost) return;
  post(slot, kRelease);
}

void VcpuBooster::stop() {
  stopping_.store(true);
  wake_.fetch_add(1);
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&wake_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  std::lock_guard lock(start_mutex_);  // no attach() starts it meanwhile: it sees stopping_
  if (booster_.joinable() && booster_.get_id() != std::this_thread::get_id()) booster_.join();
}

void VcpuBooster::end(unsigned vcpu, bool expired, std::uint64_t now) {
  Slot& slot = *slots_[vcpu];
  apply(slot.tid.load(std::memory_order_relaxed), false);
  slot.boosted.store(false, std::memory_order_release);
  if (expired) {
    slot.cooldown_until_ns = now + static_cast<std::uint64_t>(bound_.count());
    if (observer_) observer_(vcpu, true);
  }
}

void VcpuBooster::run() {
  for (;;) {
    const std::uint32_t seen = wake_.load(std::memory_order_acquire);
    const bool stopping = stopping_.load(std::memory_order_acquire);
    const std::uint64_t now = monotonic_ns();
    std::uint64_t next = 0;
    for (unsigned i = 0; i < slots_.size(); ++i) {
      Slot& slot = *slots_[i];
      const bool boosted = slot.boosted.load(std::memory_order_relaxed);
      const std::uint32_t request = stopping ? kRelease : slot.request.exchange(kNone, std::memory_order_acq_rel);
      if (request == kRelease && boosted) {
        end(i, false, now);
      } else if (request == kBoost && !boosted && now >= slot.cooldown_until_ns &&
                 apply(slot.tid.load(std::memory_order_relaxed), true)) {
        slot.deadline_ns = now + static_cast<std::uint64_t>(bound_.count());
        slot.boosted.store(true, std::memory_order_release);
        if (observer_) observer_(i, false);
      } else if (boosted && now >= slot.deadline_ns) {
        end(i, true, now);
      }
      if (slot.boosted.load(std::memory_order_relaxed) && (next == 0 || slot.deadline_ns < next)) next = slot.deadline_ns;
    }
    if (stopping) return;
    // Sleep until the next deadline or the next request (a changed word
    // returns at once: no request is missed between the scan and the wait).
    if (next == 0) {
      ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&wake_), FUTEX_WAIT_PRIVATE, seen, nullptr, nullptr, 0);
    } else {
      const std::uint64_t left = next > monotonic_ns() ? next - monotonic_ns() : 0;
      if (left == 0) continue;
      const timespec timeout{static_cast<std::time_t>(left / 1000000000), static_cast<long>(left % 1000000000)};
      ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&wake_), FUTEX_WAIT_PRIVATE, seen, &timeout, nullptr, 0);
    }
  }
}

}  // namespace lockvisor::pvlock
