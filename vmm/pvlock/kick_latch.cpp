#include "vmm/pvlock/kick_latch.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <ctime>

#include "vmm/util/monotonic_clock.h"

namespace lockvisor::pvlock {
namespace {

void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected) {
  // Returns on a wake, a signal, or at once when word != expected (EAGAIN):
  // callers loop and re-read the word in every case.
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

// Like futex_wait, but gives up after `timeout` (relative, CLOCK_MONOTONIC).
void futex_wait_for(std::atomic<std::uint32_t>& word, std::uint32_t expected, std::chrono::nanoseconds timeout) {
  const auto ns = timeout.count();
  const timespec relative{static_cast<std::time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, &relative, nullptr, 0);
}

void futex_wake_all(std::atomic<std::uint32_t>& word) {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
}

}  // namespace

KickDelivery KickLatch::kick(KickMode mode) {
  epoch_->fetch_add(1);
  std::uint32_t old = word_.load();
  for (;;) {
    if (mode == KickMode::kLossy && (old & kHalted) == 0) return KickDelivery::kDropped;
    if (old & kPending) return KickDelivery::kCoalesced;
    if (word_.compare_exchange_weak(old, old | kPending)) break;
  }
  if (old & kHalted) futex_wake_all(word_);
  return KickDelivery::kDelivered;
}

bool KickLatch::try_consume(std::uint32_t& seen) {
  while (seen & kPending) {
    if (word_.compare_exchange_weak(seen, seen & ~(kPending | kHalted | kTimed))) return true;
  }
  return false;
}

bool KickLatch::try_expire(std::uint32_t& seen) {
  while ((seen & kPending) == 0) {
    if (word_.compare_exchange_weak(seen, seen & ~(kHalted | kTimed))) return true;
  }
  return false;
}

HaltOutcome KickLatch::halt(std::uint64_t poll_ns, std::uint64_t* polled_ns, std::uint64_t limit_ns) {
  if (polled_ns) *polled_ns = 0;
  epoch_->fetch_add(1);
  const std::uint64_t began = limit_ns > 0 ? monotonic_ns() : 0;
  const std::uint32_t halted = limit_ns > 0 ? kHalted | kTimed : kHalted;
  std::uint32_t seen = word_.load();
  for (;;) {
    if (seen & kStop) return HaltOutcome::kStopped;
    if (try_consume(seen)) return HaltOutcome::kImmediate;
    if (seen & kStop) continue;
    // Announce the halt; fails (and re-evaluates) if a kick landed meanwhile.
    if (word_.compare_exchange_weak(seen, seen | halted)) break;
  }
  seen |= halted;
  // A limit shortens the poll too: the whole halt ends at began + limit_ns.
  if (limit_ns > 0 && poll_ns > limit_ns) poll_ns = limit_ns;

  if (poll_ns > 0) {
    const std::uint64_t start = monotonic_ns();
    const std::uint64_t deadline = start + poll_ns;
    std::uint64_t now = start;
    do {
      seen = word_.load();
      if (seen & (kPending | kStop)) break;
      __builtin_ia32_pause();
      now = monotonic_ns();
    } while (now < deadline);
    if (polled_ns) *polled_ns = now - start;
    if (try_consume(seen)) {
      epoch_->fetch_add(1);
      return HaltOutcome::kPolled;
    }
  }

  for (;;) {
    seen = word_.load();
    if (seen & kStop) {
      word_.fetch_and(~(kHalted | kTimed));
      return HaltOutcome::kStopped;
    }
    if (try_consume(seen)) {
      epoch_->fetch_add(1);
      return HaltOutcome::kWoken;
    }
    if (limit_ns == 0) {
      futex_wait(word_, seen);
      continue;
    }
    const std::uint64_t now = monotonic_ns();
    if (now - began >= limit_ns) {
      if (try_expire(seen)) {
        epoch_->fetch_add(1);
        return HaltOutcome::kExpired;
      }
      continue;  // a kick landed at the limit: consume it above
    }
    futex_wait_for(word_, seen, std::chrono::nanoseconds(limit_ns - (now - began)));
  }
}

void KickLatch::stop() {
  epoch_->fetch_add(1);
  word_.fetch_or(kStop);
  futex_wake_all(word_);
}

void StopFlag::set() {
  word_.store(1);
  futex_wake_all(word_);
}

bool StopFlag::sleep_for(std::chrono::nanoseconds duration) const {
  const auto deadline = std::chrono::steady_clock::now() + duration;
  for (;;) {
    if (is_set()) return true;
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::nanoseconds::zero()) return false;
    // Returns on set()'s wake, at once if the word is no longer 0, on a
    // signal (SIGUSR1 kick-out) or at the timeout: re-check in every case.
    futex_wait_for(word_, 0, std::chrono::duration_cast<std::chrono::nanoseconds>(left));
  }
}

}  // namespace lockvisor::pvlock
