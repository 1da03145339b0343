// policy_registry_test.cpp: the auto policy's choice per Env configuration,
// the registry dispatcher, and the negative control (busted lock).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "harness.h"
#include "locks/auto_policy.h"
#include "locks/busted.h"
#include "locks/registry.h"
#include "native_env.h"

namespace lockvisor::test {
namespace {

using locks::AutoChoice;
using locks::AutoLock;
using locks::AutoPolicy;
using locks::LockEvent;

template <class Env>
void expect_choice(AutoChoice want, const char* name, unsigned cpus = 8) {
  Env::reset();
  Env::set_nr_cpus(cpus);
  AutoPolicy<Env>::reset_for_testing();
  EXPECT_EQ(AutoLock<Env>::chosen(), want);
  EXPECT_STREQ(AutoLock<Env>::chosen_name(), name);

  // And the chosen lock actually works through AutoLock.
  AutoLock<Env> lock{};
  const u64 n = scaled(8000);
  const StressResult r = stress<AutoLock<Env>, Env>(lock, 4, n);
  EXPECT_EQ(r.violations, 0u);
  EXPECT_EQ(r.total, 4 * n);
  EXPECT_FALSE(lock.is_locked());
  EXPECT_EQ(AutoLock<Env>::chosen(), want) << "the choice must not change after first use";
  const u64 queued = Env::event_total(LockEvent::lock_slowpath) + Env::event_total(LockEvent::lock_pending);
  if (want == AutoChoice::kTas) {
    EXPECT_EQ(queued, 0u) << "tas never queues";
  }
  if (want != AutoChoice::kPvQSpinLock) {
    EXPECT_EQ(Env::event_total(LockEvent::pv_wait), 0u) << "native never halts";
  }
}

//                       tag  pv     virt   dedicated
TEST(AutoPolicy, PvAvailableOvercommittedChoosesPvQSpinLock) {
  expect_choice<NativeEnvT<40, true, true, false>>(AutoChoice::kPvQSpinLock, "pvqspinlock");
}
TEST(AutoPolicy, DedicatedVcpusChooseNativeQSpinLock) {
  expect_choice<NativeEnvT<41, true, true, true>>(AutoChoice::kQSpinLock, "qspinlock");
}
TEST(AutoPolicy, NoPvSupportChoosesTas) {
  expect_choice<NativeEnvT<42, false, true, false>>(AutoChoice::kTas, "tas");
}
TEST(AutoPolicy, BareMetalChoosesNativeQSpinLock) {
  expect_choice<NativeEnvT<43, true, false, false>>(AutoChoice::kQSpinLock, "qspinlock");
  expect_choice<NativeEnvT<44, false, false, false>>(AutoChoice::kQSpinLock, "qspinlock");
}
TEST(AutoPolicy, SingleCpuChoosesNativeQSpinLock) {
  using Env = NativeEnvT<45, true, true, false>;
  Env::set_nr_cpus(1);
  AutoPolicy<Env>::reset_for_testing();
  EXPECT_EQ(AutoLock<Env>::chosen(), AutoChoice::kQSpinLock);
  EXPECT_STREQ(AutoLock<Env>::chosen_name(), "qspinlock");
}
TEST(AutoPolicy, MainlineOrderNoPvBeatsDedicated) {
  // kvm_spinlock_init() tests PV_UNHALT before KVM_HINTS_REALTIME.
  using Env = NativeEnvT<46, false, true, true>;
  AutoPolicy<Env>::reset_for_testing();
  EXPECT_EQ(AutoLock<Env>::chosen(), AutoChoice::kTas);
}

// ---- registry ---------------------------------------------------------------

TEST(Registry, ListsTheFourteenLocksWithUniqueNames) {
  const std::set<std::string> want = {"ticket", "qspinlock", "unfair", "tas",  "tas-backoff", "pvqspinlock", "pvticket",
                                      "pvbounded", "cna",    "pvcna",  "hq",   "pvhq",        "pvconfer",    "auto"};
  std::set<std::string> got;
  for (const auto& l : locks::kLocks) {
    EXPECT_TRUE(got.insert(l.name).second) << "duplicate " << l.name;
    EXPECT_NE(std::string(l.description), "");
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(locks::find_lock("busted"), nullptr) << "the broken lock must never be listed";
}

TEST(Registry, DispatchCallsTheNamedType) {
  for (const auto& l : locks::kLocks) {
    int calls = 0;
    std::string seen;
    const bool ok = locks::with_lock_type<NativeEnv>(l.name, [&]<class L>() {
      calls++;
      seen = L::kName;
      L lock{};  // and it is a usable lock
      NativeEnv::bind_cpu(0);
      lock.lock();
      EXPECT_TRUE(lock.is_locked());
      lock.unlock();
    });
    EXPECT_TRUE(ok) << l.name;
    EXPECT_EQ(calls, 1) << l.name;
    EXPECT_EQ(seen, l.name);
  }
  int calls = 0;
  EXPECT_FALSE(locks::with_lock_type<NativeEnv>("no-such-lock", [&]<class L>() { calls++; }));
  EXPECT_FALSE(locks::with_lock_type<NativeEnv>("busted", [&]<class L>() { calls++; }));
  EXPECT_EQ(calls, 0);
}

// The traits in each row are the lock's own constexprs, and say what the
// algorithms are: the locks that halt unconditionally need PV, the FIFO ones
// are fair, every lock that lets a waiter be bypassed is not.
TEST(Registry, TraitsComeFromEachLock) {
  for (const auto& l : locks::kLocks) {
    locks::with_lock_type<NativeEnv>(l.name, [&]<class L>() {
      EXPECT_EQ(l.needs_pv, L::kNeedsPv) << l.name;
      EXPECT_EQ(l.fair, L::kFair) << l.name;
    });
  }
  std::set<std::string> needs_pv, fair;
  for (const auto& l : locks::kLocks) {
    if (l.needs_pv) needs_pv.insert(l.name);
    if (l.fair) fair.insert(l.name);
  }
  EXPECT_EQ(needs_pv, (std::set<std::string>{"pvqspinlock", "pvticket", "pvcna", "pvhq", "pvconfer"}));
  EXPECT_EQ(fair, (std::set<std::string>{"ticket", "qspinlock", "pvticket"}));
  static_assert(!locks::find_lock("pvbounded")->needs_pv &&
                !locks::find_lock("pvbounded")->fair);
  static_assert(locks::find_lock("pvticket")->needs_pv && locks::find_lock("pvticket")->fair);
}

// ---- negative control ---------------------------------------------------------

// The checker must catch a broken lock.  (Atomic-counter mode: the race is
// logical, so the run stays clean under ThreadSanitizer.)
TEST(NegativeControl, BustedLockFailsTheChecker) {
  using Env = NativeEnvT<50>;
  Env::reset();
  u64 violations = 0, lost = 0;
  for (int attempt = 0; attempt < 20 && violations == 0 && lost == 0; attempt++) {
    locks::BustedLock<Env> lock{};
    const StressResult r = stress<locks::BustedLock<Env>, Env, /*kAtomicCounter=*/true>(lock, 2, 20000);
    violations += r.violations;
    lost += 2 * 20000 - r.total;
  }
  std::printf("[ busted   ] violations=%llu lost-updates=%llu\n", static_cast<unsigned long long>(violations),
              static_cast<unsigned long long>(lost));
  EXPECT_GT(violations + lost, 0u) << "the mutual-exclusion checker cannot see a broken lock";
}

}  // namespace
}  // namespace lockvisor::test
