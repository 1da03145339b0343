#include "vmm/native/thread_parks.h"

#include <signal.h>
#include <time.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "vmm/util/error.h"

namespace lockvisor::native {
namespace {

std::int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

sigset_t park_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, ThreadParks::park_signal());
  return set;
}

}  // namespace

struct alignas(64) ThreadParks::Slot {
  ThreadParks* owner = nullptr;
  unsigned index = 0;
  pthread_t thread{};
  std::atomic<bool> armed{false};
  // CLOCK_MONOTONIC ns at which the present park ends; only ever raised.
  std::atomic<std::int64_t> end_ns{0};
  // A signal is on its way or its handler runs: a request that finds it
  // set only raises end_ns, and the handler sees the raise (see serve()).
  std::atomic<bool> signalled{false};
  std::atomic<std::uint64_t> requested{0};
  std::atomic<std::uint64_t> parks{0};
  std::atomic<std::uint64_t> parked_ns{0};
};

thread_local ThreadParks::Slot* ThreadParks::tls_slot_ = nullptr;

int ThreadParks::park_signal() { return SIGRTMIN + 1; }

ThreadParks::ThreadParks(unsigned threads, ShowParked show)
    : threads_(threads), show_(show), slots_(std::make_unique<Slot[]>(threads)) {
  for (unsigned i = 0; i < threads; ++i) {
    slots_[i].owner = this;
    slots_[i].index = i;
  }
  static std::once_flag installed;
  std::call_once(installed, [] {
    struct sigaction action {};
    action.sa_handler = &ThreadParks::on_signal;
    // Untimed blocking calls go on after the park; timed ones (the Env's
    // futex waits) return EINTR, which the Env treats as a spurious wake-up.
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    if (sigaction(park_signal(), &action, nullptr) != 0) fail_host("sigaction (park signal): {}", std::strerror(errno));
  });
}

ThreadParks::~ThreadParks() = default;

void ThreadParks::arm(unsigned i) {
  Slot& s = slots_[i];
  s.thread = pthread_self();
  tls_slot_ = &s;
  const sigset_t set = park_set();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  s.armed.store(true, std::memory_order_release);  // pairs with the acquire in park()
}

void ThreadParks::disarm(unsigned i) {
  Slot& s = slots_[i];
  const sigset_t set = park_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  s.armed.store(false, std::memory_order_release);
  tls_slot_ = nullptr;
}

bool ThreadParks::park(unsigned i, std::chrono::nanoseconds duration) {
  if (i >= threads_) return false;
  Slot& s = slots_[i];
  if (!s.armed.load(std::memory_order_acquire)) return false;  // pairs with arm()'s release: s.thread is set
  const std::int64_t end = now_ns() + duration.count();
  std::int64_t cur = s.end_ns.load(std::memory_order_relaxed);
  while (cur < end && !s.end_ns.compare_exchange_weak(cur, end, std::memory_order_seq_cst)) {
  }
  s.requested.fetch_add(1, std::memory_order_relaxed);
  // seq_cst with serve()'s clear and re-read of end_ns: either this finds
  // the flag clear and signals, or serve() sees the end just raised.
  if (!s.signalled.exchange(true, std::memory_order_seq_cst)) pthread_kill(s.thread, park_signal());
  return true;
}

void ThreadParks::on_signal(int) {
  const int saved = errno;
  if (tls_slot_ != nullptr) serve(*tls_slot_);
  errno = saved;
}

// On the parked thread, in the signal handler (the signal is blocked while
// it runs: a second one waits until it returns).
void ThreadParks::serve(Slot& s) {
  const std::int64_t start = now_ns();
  if (s.owner->show_ != nullptr) s.owner->show_(s.index, true);
  for (;;) {
    for (;;) {
      const std::int64_t end = s.end_ns.load(std::memory_order_acquire);
      if (now_ns() >= end) break;
      const timespec until{static_cast<time_t>(end / 1'000'000'000), static_cast<long>(end % 1'000'000'000)};
      clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, nullptr);
    }
    s.signalled.store(false, std::memory_order_seq_cst);
    // A request that found `signalled` still set raised end_ns before our
    // clear: it is visible now, and it is ours to serve.
    if (s.end_ns.load(std::memory_order_seq_cst) <= now_ns()) break;
    if (s.signalled.exchange(true, std::memory_order_seq_cst)) break;  // a new signal serves the rest
  }
  if (s.owner->show_ != nullptr) s.owner->show_(s.index, false);
  s.parks.fetch_add(1, std::memory_order_relaxed);
  s.parked_ns.fetch_add(static_cast<std::uint64_t>(now_ns() - start), std::memory_order_relaxed);
}

ThreadParkCounts ThreadParks::counts(unsigned i) const {
  const Slot& s = slots_[i];
  return {s.requested.load(std::memory_order_relaxed), s.parks.load(std::memory_order_relaxed),
          s.parked_ns.load(std::memory_order_relaxed)};
}

}  // namespace lockvisor::native
