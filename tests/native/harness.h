// harness.h: thread runner and mutual-exclusion checker for the native lock
// tests (CK validate.h / locktorture style).
#pragma once

#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "locks/atomic.h"
#include "native_env.h"

namespace lockvisor::test {

// Iteration scale: ThreadSanitizer makes every atomic access 5-20x slower.
#if defined(__SANITIZE_THREAD__)
inline constexpr unsigned kIterDivisor = 4;
#else
inline constexpr unsigned kIterDivisor = 1;
#endif
inline constexpr u64 scaled(u64 iters) { return iters / kIterDivisor; }

// Seconds after which a run is declared hung (lost wake-up / deadlock) and the
// process aborts with a message instead of hanging the test suite.
inline constexpr int kWatchdogSeconds = 90;

// Sets lock parameters ("key=value", locks/pvbounded_tuning.h) for one
// test, restores the previous ones after.
class ParamScope {
 public:
  explicit ParamScope(const std::vector<std::string>& p) : saved_(locks::pvb::g_tuning) {
    EXPECT_EQ(native::apply_lock_tuning(p), nullptr);
  }
  ~ParamScope() { locks::pvb::g_tuning = saved_; }
  ParamScope(const ParamScope&) = delete;
  ParamScope& operator=(const ParamScope&) = delete;

 private:
  locks::pvb::Tuning saved_;
};

// Runs body(cpu) on n threads bound to CPU indices 0..n-1 of Env, all released
// at once.  Returns the wall time in seconds.
template <class Env, class F>
double run_on_cpus(unsigned n, F&& body, const char* what = "run_on_cpus") {
  Env::set_nr_cpus(n);
  std::atomic<unsigned> ready{0};
  std::atomic<bool> go{false};
  std::atomic<unsigned> done{0};
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (unsigned i = 0; i < n; i++) {
    threads.emplace_back([&, i] {
      Env::bind_cpu(static_cast<int>(i));
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      body(i);
      done.fetch_add(1, std::memory_order_release);
    });
  }
  while (ready.load() < n) std::this_thread::yield();
  const auto start = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  while (done.load(std::memory_order_acquire) < n) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(kWatchdogSeconds)) {
      std::fprintf(stderr, "WATCHDOG: %s: %u/%u threads finished after %d s; hung lock (lost wake-up?)\n",
                   what, done.load(), n, kWatchdogSeconds);
      std::abort();
    }
  }
  const auto end = std::chrono::steady_clock::now();
  for (auto& t : threads) t.join();
  return std::chrono::duration<double>(end - start).count();
}

// Shared state checked inside the critical section.
struct alignas(64) CsState {
  u64 counter = 0;  // plain (non-atomic) unless the checker is in atomic mode
  u32 owner = 0;    // cpu + 1 of the holder, 0 = nobody
  std::atomic<u64> violations{0};
};

// The critical section.  The owner word catches a second holder directly; the
// counter catches lost updates.  kAtomicCounter uses relaxed atomic
// load/store for the counter: still loses updates under a broken lock, but is
// not a C++ data race, so the negative control runs clean under TSan.  Real
// locks use the plain counter, so TSan checks their acquire/release.
template <bool kAtomicCounter = false>
inline void critical_section(CsState& s, unsigned cpu, u64 iter) {
  if (__atomic_exchange_n(&s.owner, cpu + 1, __ATOMIC_RELAXED) != 0) s.violations.fetch_add(1);
  if constexpr (kAtomicCounter) {
    const u64 v = __atomic_load_n(&s.counter, __ATOMIC_RELAXED);
    for (int i = 0; i < 8; i++) locks::cpu_relax();
    __atomic_store_n(&s.counter, v + 1, __ATOMIC_RELAXED);
  } else {
    s.counter = s.counter + 1;
  }
  // locktorture-style delays: mostly short, sometimes longer, and now and
  // then give up the host CPU while holding the lock (holder preemption).
  if (iter % 64 == 0)
    for (int i = 0; i < 100; i++) locks::cpu_relax();
  if (iter % 256 == 255) sched_yield();
  if (__atomic_exchange_n(&s.owner, 0u, __ATOMIC_RELAXED) != cpu + 1) s.violations.fetch_add(1);
}

struct StressResult {
  u64 total = 0;
  u64 violations = 0;
  u64 max_per_thread = 0;
  u64 min_per_thread = 0;
  double seconds = 0;
};

// T threads x N lock/unlock rounds on one lock.  Every 8th round first tries
// try_lock() a few times (CK's validator alternates lock and trylock), then
// falls back to lock(): a fair lock's try_lock may fail for as long as a queue
// exists.
template <class L, class Env, bool kAtomicCounter = false>
StressResult stress(L& lock, unsigned threads, u64 iters) {
  CsState s;
  std::vector<u64> per(threads, 0);
  StressResult r;
  r.seconds = run_on_cpus<Env>(
      threads,
      [&](unsigned cpu) {
        u64 mine = 0;
        for (u64 i = 0; i < iters; i++) {
          bool got = false;
          if (i % 8 == 7) {
            for (int k = 0; k < 16 && !got; k++) {
              got = lock.try_lock();
              if (!got) locks::cpu_relax();
            }
          }
          if (!got) lock.lock();
          critical_section<kAtomicCounter>(s, cpu, i);
          mine++;
          lock.unlock();
        }
        per[cpu] = mine;
      },
      L::kName);
  r.total = s.counter;
  r.violations = s.violations.load();
  r.max_per_thread = per[0];
  r.min_per_thread = per[0];
  for (u64 p : per) {
    r.max_per_thread = std::max(r.max_per_thread, p);
    r.min_per_thread = std::min(r.min_per_thread, p);
  }
  return r;
}

// gtest name generator: the lock's registry name ('-' is not allowed).
struct LockNameGenerator {
  template <class L>
  static std::string GetName(int) {
    std::string n = L::kName;
    for (char& c : n)
      if (c == '-') c = '_';
    return n;
  }
};

}  // namespace lockvisor::test
