// auto_policy.h: the KVM guest's lock choice (auto).
//
// POLICY (Linux arch/x86/kernel/kvm.c kvm_spinlock_init() + native_pv_lock_init(),
// and virt_spin_lock() in arch/x86/include/asm/qspinlock.h).  All three
// candidates operate on the same 4-byte qspinlock word, so "auto" is one word
// plus a per-Env decision:
//
//   not virtualized              -> qspinlock    (virt_spin_lock_key stays off on bare metal)
//   no PV wait/kick              -> tas          ("PV spinlocks disabled, no host support";
//                                                 virt_spin_lock() TAS, because fair locks
//                                                 suffer lock-holder preemption)
//   dedicated vCPUs              -> qspinlock    ("... with KVM_HINTS_REALTIME hints")
//   one CPU                      -> qspinlock    ("PV spinlocks disabled, single CPU")
//   otherwise                    -> pvqspinlock  ("PV spinlocks enabled")
//
// The order of the middle checks is mainline's: PV_UNHALT is tested first, so
// a dedicated guest without PV support still gets TAS.  (A 2023 proposal,
// Liangyan, moves the REALTIME check first; that changes only the
// dedicated-without-PV case.)
//
// The decision is taken once per Env, on first use, and cached; it is a pure
// function of Env's answers, so two CPUs racing to decide store the same value.
// It must not change while any AutoLock<Env> is held or contended: PV and
// native lock words mean different things (_Q_SLOW_VAL, hashed heads).
//
// UNDER vCPU PREEMPTION: see the chosen lock's header.
//
// All-zero is unlocked (trivially constructible).
#pragma once

#include "locks/atomic.h"
#include "locks/lock_env.h"
#include "locks/pv_qspinlock.h"
#include "locks/qspinlock.h"
#include "locks/qspinlock_word.h"
#include "locks/tas.h"

namespace lockvisor::locks {

enum class AutoChoice : u8 { kUndecided = 0, kPvQSpinLock, kQSpinLock, kTas };

template <class Env>
struct AutoPolicy {
  static inline u8 cached;  // AutoChoice, 0 until decided

  static AutoChoice decide() {
    if (!Env::virtualized()) return AutoChoice::kQSpinLock;
    if (!Env::pv_available()) return AutoChoice::kTas;
    if (Env::dedicated()) return AutoChoice::kQSpinLock;
    if (Env::nr_cpus() <= 1) return AutoChoice::kQSpinLock;
    return AutoChoice::kPvQSpinLock;
  }

  static AutoChoice choice() {
    u8 c = load_relaxed(&cached);
    if (__builtin_expect(c == 0, 0)) {
      c = static_cast<u8>(decide());
      store_relaxed(&cached, c);
    }
    return static_cast<AutoChoice>(c);
  }

  // Tests only: forget the decision (no AutoLock<Env> may be in use).
  static void reset_for_testing() { store_relaxed(&cached, u8{0}); }
};

template <class Env>
class AutoLock {
  using Pv = PvQSpinLock<Env>;
  using Native = QSpinLock<Env>;

 public:
  static constexpr const char* kName = "auto";
  // Traits for the registry (registry.h): picks a PV lock only when PV is available; may pick TAS.
  static constexpr bool kNeedsPv = false;
  static constexpr bool kFair = false;
  static constexpr const char* kDescription =
      "KVM guest policy: pvqspinlock if PV, qspinlock if bare metal/dedicated/1 CPU, else tas";

  void lock() {
    switch (AutoPolicy<Env>::choice()) {
      case AutoChoice::kPvQSpinLock: Pv::lock_word(&w_); return;
      case AutoChoice::kTas: tas_detail::acquire<Env>(&w_.val); return;  // 0 -> _Q_LOCKED_VAL
      default: Native::lock_word(&w_); return;
    }
  }

  void unlock() {
    switch (AutoPolicy<Env>::choice()) {
      case AutoChoice::kPvQSpinLock: Pv::unlock_word(&w_); return;
      // TAS and native both release with *,*,1 -> *,*,0 (the TAS word is
      // only ever 0 or _Q_LOCKED_VAL).
      default: q::clear_locked_release(&w_); return;
    }
  }

  bool try_lock() {
    if (AutoPolicy<Env>::choice() == AutoChoice::kTas) return tas_detail::try_acquire(&w_.val);
    return q::trylock_word(&w_);
  }

  bool is_locked() const { return q::read(&w_) != 0; }

  static AutoChoice chosen() { return AutoPolicy<Env>::choice(); }
  static const char* chosen_name() {
    switch (chosen()) {
      case AutoChoice::kPvQSpinLock: return Pv::kName;
      case AutoChoice::kTas: return TasLock<Env>::kName;
      default: return Native::kName;
    }
  }

  u32 value() const { return q::read(&w_); }

 private:
  q::QSpinWord w_;
};

}  // namespace lockvisor::locks
