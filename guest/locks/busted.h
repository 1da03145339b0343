// busted.h: a deliberately BROKEN lock - do not use (locktorture's lock_busted).
//
// It exists only as a negative control for the mutual-exclusion checker in
// the tests: running it must produce failures, which shows that the checker
// can see a violation.  It is not in the registry and must never be.
//
// ALGORITHM (wrong on purpose): check-then-set without atomicity.
//   lock():   wait until the word reads 0, then store 1.  Two CPUs can both
//             read 0 and both "acquire".
//   unlock(): store 0.
// The accesses are atomic (relaxed) so that the host tests see a logical race
// in the checker, not a C++ data race on the lock word itself.
#pragma once

#include "locks/atomic.h"
#include "locks/lock_env.h"

namespace lockvisor::locks {

// kWindow: pause iterations between the check and the set. When vCPUs do
// not run at the same instant (one host CPU, or TCG running them in turn), a
// violation needs a CPU descheduled inside this window while another is
// descheduled inside its critical section; the guest's negative control
// widens the window somewhat (and uses long critical sections) so that this
// happens within a second. Too wide a window makes overlaps rarer again:
// the late CPU then enters after the early one has left.
template <class Env, unsigned kWindow = 64>
class BustedLock {
 public:
  static constexpr const char* kName = "busted";
  static constexpr const char* kDescription = "BROKEN: check-then-set, for negative tests only";

  void lock() {
    while (load_relaxed(&w_) != 0) spin_relax<Env>();
    // The window: another CPU can pass the check above right now.
    for (unsigned i = 0; i < kWindow; i++) cpu_relax();
    store_relaxed(&w_, u32{1});
  }
  void unlock() { store_relaxed(&w_, u32{0}); }
  bool try_lock() {
    if (load_relaxed(&w_) != 0) return false;
    store_relaxed(&w_, u32{1});
    return true;
  }
  bool is_locked() const { return load_relaxed(&w_) != 0; }

 private:
  u32 w_;
};

}  // namespace lockvisor::locks
