// One lane's events for the timeline (--trace, docs/trace.md): a fixed-size
// array allocated before the run, written by one thread only, with no lock
// and no allocation on the write path. A full buffer keeps its first events
// and counts the rest as dropped (the trace file says how many, where).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "locks/lock_events.h"

namespace lockvisor::trace {

// What an event is; the lane it belongs to follows from the kind.
enum class EventKind : std::uint8_t {
  kGuest,      // vCPU lane: inside KVM_RUN (in the guest, or descheduled by the host while in it)
  kExit,       // vCPU lane: handling one exit; arg = machine::ExitKind
  kHalt,       // vCPU lane: blocked in the PV backend's halt (nested inside its exit)
  kParked,     // vCPU lane: held out of the guest; arg = machine::ParkCause
  kKick,       // vCPU lane, instant: this vCPU kicked vCPU `arg` (flow `id` starts)
  kWake,       // vCPU lane, instant: this vCPU's halt consumed the kick of flow `id`
  kPreempted,  // host lane: runnable but off its host CPU; arg: 1 exact, 2 schedstat estimate, 3 `id` preemptions merged
  kLockWait,   // lock lane: arrive -> acquired; arg = lock slot
  kLockHold,   // lock lane: acquired -> released; arg = lock slot
};

// kLockWait/kLockHold: the lock-trace record's path code was not one the VMM
// knows (a guest's word; never used as an index).
inline constexpr std::uint8_t kInvalidPath = 0xff;

// A path's name in a trace file (args.path) and its reports: the guest's
// (locks::kAcqPathNames), and for any code beyond them this one, which the
// reader takes back as kInvalidPath.
inline constexpr const char* kInvalidPathName = "invalid";
inline const char* acq_path_name(unsigned path) {
  return path < locks::kAcqPathCount ? locks::kAcqPathNames[path] : kInvalidPathName;
}

// Times are CLOCK_MONOTONIC nanoseconds (the trace's one clock).
struct Event {
  std::uint64_t begin_ns;
  std::uint64_t end_ns;  // == begin_ns for instants
  std::uint64_t id;      // flow id (kKick, kWake), else 0
  std::uint32_t arg;
  EventKind kind;
  // kLockWait/kLockHold: how the lock was taken, a locks::AcqPath below
  // locks::kAcqPathCount (guest/locks/lock_events.h) or kInvalidPath.
  std::uint8_t path = 0;
};

class TraceBuffer {
 public:
  TraceBuffer() = default;
  explicit TraceBuffer(std::size_t capacity)
      : events_(std::make_unique_for_overwrite<Event[]>(capacity)), capacity_(capacity) {}

  // Never blocks, never allocates.
  void add(const Event& event) noexcept {
    if (size_ < capacity_) {
      events_[size_++] = event;
    } else {
      ++dropped_;
    }
  }
  std::span<const Event> events() const { return {events_.get(), size_}; }
  std::size_t capacity() const { return capacity_; }
  std::uint64_t dropped() const { return dropped_; }
  // Drops counted elsewhere (the guest's full lock log) and reported here.
  void add_dropped(std::uint64_t n) { dropped_ += n; }

 private:
  std::unique_ptr<Event[]> events_;
  std::size_t capacity_ = 0;
  std::size_t size_ = 0;
  std::uint64_t dropped_ = 0;
};

}  // namespace lockvisor::trace
