// atomic.h: thin, freestanding wrappers over the GCC/Clang __atomic builtins.
//
// Every lock in guest/locks/ does its shared-memory accesses through these
// helpers, so each access says its ordering at the call site (acquire,
// release, relaxed, acq_rel, seq_cst) and every access to a shared location is
// an atomic access of one fixed size.  The same header is compiled into the
// freestanding guest (-ffreestanding -nostdlib) and into the host tests, where
// ThreadSanitizer understands the builtins directly.
//
// Naming follows the kernel where it helps readers cross-check:
//   load_acquire / store_release        smp_load_acquire / smp_store_release
//   load_relaxed / store_relaxed        READ_ONCE / WRITE_ONCE
//   xchg / cmpxchg                      full-barrier xchg()/cmpxchg() (seq_cst)
//   cmpxchg_acquire / cmpxchg_release   the _acquire/_release variants
//   fetch_or / fetch_and / fetch_add    atomic_fetch_*() with explicit order
//   smp_mb()                            a full fence
//
// The CPU primitives beside them, cpu_relax() (the spin-wait hint) and
// read_lock_clock() (the clock of the locks that bound a wait by time), are
// per architecture: locks/arch/primitives.h picks them.
#pragma once

#include "locks/arch/primitives.h"

namespace lockvisor::locks {

enum class Order : int {
  relaxed = __ATOMIC_RELAXED,
  acquire = __ATOMIC_ACQUIRE,
  release = __ATOMIC_RELEASE,
  acq_rel = __ATOMIC_ACQ_REL,
  seq_cst = __ATOMIC_SEQ_CST,
};

namespace detail {
// The failure order of a compare-exchange may not be release/acq_rel.
constexpr int failure_order(Order o) {
  switch (o) {
    case Order::release: return __ATOMIC_RELAXED;
    case Order::acq_rel: return __ATOMIC_ACQUIRE;
    default: return static_cast<int>(o);
  }
}
}  // namespace detail

template <class T>
[[gnu::always_inline]] inline T load_relaxed(const T* p) {
  return __atomic_load_n(p, __ATOMIC_RELAXED);
}
template <class T>
[[gnu::always_inline]] inline T load_acquire(const T* p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
template <class T>
[[gnu::always_inline]] inline void store_relaxed(T* p, T v) {
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
}
template <class T>
[[gnu::always_inline]] inline void store_release(T* p, T v) {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

// Exchange; default is a full barrier like the kernel's xchg().
template <class T>
[[gnu::always_inline]] inline T xchg(T* p, T v, Order o = Order::seq_cst) {
  return __atomic_exchange_n(p, v, static_cast<int>(o));
}

// Strong compare-exchange.  On failure *expected is updated to the value seen
// (try_cmpxchg style); returns true on success.
template <class T>
[[gnu::always_inline]] inline bool try_cmpxchg(T* p, T* expected, T desired,
                                               Order o = Order::seq_cst) {
  return __atomic_compare_exchange_n(p, expected, desired, false, static_cast<int>(o),
                                     detail::failure_order(o));
}

// Value-returning compare-exchange (cmpxchg style): returns the old value.
template <class T>
[[gnu::always_inline]] inline T cmpxchg(T* p, T expected, T desired, Order o = Order::seq_cst) {
  __atomic_compare_exchange_n(p, &expected, desired, false, static_cast<int>(o),
                              detail::failure_order(o));
  return expected;
}
template <class T>
[[gnu::always_inline]] inline T cmpxchg_acquire(T* p, T expected, T desired) {
  return cmpxchg(p, expected, desired, Order::acquire);
}
template <class T>
[[gnu::always_inline]] inline T cmpxchg_release(T* p, T expected, T desired) {
  return cmpxchg(p, expected, desired, Order::release);
}

template <class T>
[[gnu::always_inline]] inline T fetch_or(T* p, T v, Order o = Order::seq_cst) {
  return __atomic_fetch_or(p, v, static_cast<int>(o));
}
template <class T>
[[gnu::always_inline]] inline T fetch_and(T* p, T v, Order o = Order::seq_cst) {
  return __atomic_fetch_and(p, v, static_cast<int>(o));
}
template <class T>
[[gnu::always_inline]] inline T fetch_add(T* p, T v, Order o = Order::seq_cst) {
  return __atomic_fetch_add(p, v, static_cast<int>(o));
}

// Full memory barrier (smp_mb).
[[gnu::always_inline]] inline void smp_mb() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

// Compiler-only barrier (barrier()).
[[gnu::always_inline]] inline void barrier() { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

}  // namespace lockvisor::locks
