// Cross-vCPU shared variables for guest programs: explicit atomics, so that
// every access is visibly a synchronisation point.
#pragma once
#include "lockvisor/abi/types.h"
#include "runtime/cpu.h"

namespace guest {

template <typename T>
class Shared {
 public:
  T load() const { return __atomic_load_n(&value_, __ATOMIC_ACQUIRE); }
  void store(T v) { __atomic_store_n(&value_, v, __ATOMIC_RELEASE); }
  T add(T v) { return __atomic_add_fetch(&value_, v, __ATOMIC_SEQ_CST); }
  // Spins (at CPL3, no exits) until the value equals `v`.
  void wait_for(T v) const {
    while (load() != v) cpu_relax();
  }

 private:
  alignas(64) T value_{};
};

}  // namespace guest
