// freestanding_check.cpp: proves every lock header compiles as guest code.
//
// Built as an OBJECT library with the guest's flags
//   -ffreestanding -fno-exceptions -fno-rtti -nostdlib -O2 (x86: -mno-red-zone)
// (see CMakeLists.txt): no libc/libstdc++ headers, no exceptions, no RTTI.
// It instantiates every lock (including busted and the PV variants with
// non-default thresholds) with a dummy Env and references every operation so
// the templates are fully compiled, not just parsed.
#include "locks/atomic.h"
#include "locks/auto_policy.h"
#include "locks/busted.h"
#include "locks/lock_env.h"
#include "locks/lock_events.h"
#include "locks/pv_qspinlock.h"
#include "locks/pv_ticket.h"
#include "locks/pvbounded.h"
#include "locks/qspinlock.h"
#include "locks/qspinlock_word.h"
#include "locks/registry.h"
#include "locks/tas.h"
#include "locks/tas_backoff.h"
#include "locks/ticket.h"
#include "locks/unfair_qspinlock.h"

#if __STDC_HOSTED__
#error "freestanding_check.cpp must be compiled with -ffreestanding"
#endif

namespace {

using namespace lockvisor::locks;

LockEvents g_events[kMaxCpus];
volatile unsigned g_cpu;

struct DummyEnv {
  static unsigned cpu() { return g_cpu; }
  static unsigned nr_cpus() { return 4; }
  // Suspends as the guest's Env does: HLT on x86, WFI on RISC-V.
  static void wait(volatile u8* ptr, u8 val) {
#if defined(__riscv)
    if (*ptr == val) __asm__ volatile("wfi" ::: "memory");
#else
    if (*ptr == val) __asm__ volatile("hlt" ::: "memory");
#endif
  }
  static void kick(unsigned cpu) { __asm__ volatile("" ::"r"(cpu) : "memory"); }
  static bool pv_available() { return true; }
  static bool virtualized() { return true; }
  static bool dedicated() { return false; }
  static LockEvents& events() { return g_events[g_cpu]; }
  [[noreturn]] static void bug(const char*) { __builtin_trap(); }
};
static_assert(LockEnv<DummyEnv>);

template <class L>
L g_lock;  // zero-initialised = unlocked, like a lock in shared memory

template <class L>
void exercise() {
  static_assert(Lock<L>);
  L& l = g_lock<L>;
  l.lock();
  (void)l.is_locked();
  l.unlock();
  if (l.try_lock()) l.unlock();
}

}  // namespace

// extern "C" so the symbol (and with it every instantiation) is kept.
extern "C" unsigned lockvisor_freestanding_check(const char* name) {
  unsigned hits = 0;
  // Every registry lock, through the dispatcher (instantiates all of them).
  with_lock_type<DummyEnv>(name, [&]<class L>() {
    exercise<L>();
    hits++;
  });
  // Variants the registry's default arguments do not reach.
  exercise<BustedLock<DummyEnv>>();
  exercise<PvQSpinLock<DummyEnv, 64>>();
  exercise<PvTicketLock<DummyEnv, 64>>();
  exercise<TasBackoffLock<DummyEnv, 1, 8>>();
  hits += static_cast<unsigned>(pvb::set_tuning(pvb::kTuningKeys[0], 500, 1000000));
  for (unsigned i = 0; i < kLockEventCount; i++) {
    hits += static_cast<unsigned>(kLockEventNames[i][0]) +
            static_cast<unsigned>(g_events[0].get(static_cast<LockEvent>(i)));
  }
  for (const LockInfo& info : kLocks) hits += static_cast<unsigned>(info.description[0]);
  hits += static_cast<unsigned>(AutoLock<DummyEnv>::chosen_name()[0]);
  return hits;
}
