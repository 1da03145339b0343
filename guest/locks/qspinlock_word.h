// qspinlock_word.h: the 32-bit queued-spinlock word and the MCS helpers that
// every qspinlock-family lock (qspinlock, unfair, pvqspinlock, auto) shares.
//
// Word layout (Linux include/asm-generic/qspinlock_types.h, NR_CPUS < 16K variant):
//
//    31            18 17  16 15        8 7          0
//   +----------------+------+-----------+------------+
//   | tail cpu (+1)  | idx  |  pending  |   locked   |
//   +----------------+------+-----------+------------+
//
//   locked  (byte 0)  1 = held; 3 = _Q_SLOW_VAL (PV: held, unlocker must kick)
//   pending (byte 1)  1 = one waiter spins on the word instead of queueing
//   tail    (16..31)  (cpu + 1, nesting idx) of the last queued MCS node;
//                     0 = no queue (hence the +1)
//
// The notation used throughout is the (tail, pending, locked) triple; "*"
// means "any", "n"/"p" a non-zero tail.
//
// ---- One access size for the whole word -----------------------------------
// Linux overlays u8 `locked`, u8 `pending` and u16 `tail` on the word and
// uses byte/halfword stores and xchgs on them.  We don't: every access to the
// lock word here is a 32-bit atomic on `val`.  Byte operations (set the
// locked byte, cmpxchg the locked byte 0->1, xchg the tail, ...) are emulated
// with a 32-bit compare-exchange loop that leaves the other bytes untouched.
// Reasons:
//   * the C++ memory model has no mixed-size atomics, and ThreadSanitizer
//     tracks happens-before per address: a release on the 16-bit tail at +2
//     would not synchronise with an acquire on the word at +0, giving false
//     races in the host tests (and a real model gap);
//   * it keeps every ordering argument in one modification order.
// Cost: xchg_tail is a cmpxchg loop (what Linux does for _Q_PENDING_BITS == 1
// anyway), and under ThreadSanitizer unlock is a locked RMW instead of a
// plain byte store (what the generic qspinlock of Waiman Long's v6 series, patch 01, did:
// atomic_sub); other builds store the byte (clear_locked_release).  The one exception
// is Env::wait(&locked_byte(), _Q_SLOW_VAL), which re-reads byte 0 for its
// "still equal?" check only; see lock_env.h.
#pragma once

#include "locks/atomic.h"
#include "locks/lock_env.h"

namespace lockvisor::locks::q {

// ---- Layout constants (names as in Linux, values for < 16K CPUs) -----------
inline constexpr u32 kLockedOffset = 0;
inline constexpr u32 kLockedBits = 8;
inline constexpr u32 kLockedMask = ((1u << kLockedBits) - 1) << kLockedOffset;
inline constexpr u32 kLockedVal = 1u << kLockedOffset;
inline constexpr u32 kSlowVal = 3u << kLockedOffset;  // _Q_SLOW_VAL (PV only)

inline constexpr u32 kPendingOffset = kLockedOffset + kLockedBits;
inline constexpr u32 kPendingBits = 8;
inline constexpr u32 kPendingMask = ((1u << kPendingBits) - 1) << kPendingOffset;
inline constexpr u32 kPendingVal = 1u << kPendingOffset;

// Nesting levels per CPU: task, softirq, hardirq, NMI (_Q_MAX_NODES).
inline constexpr unsigned kMaxNodes = 4;
inline constexpr u32 kTailIdxBits = 2;

// Where the MCS tail sits: from bit kIdxOffset to the top of the word, the
// nesting idx and then cpu + 1.  qspinlock's tail (QTail) starts at 16; a
// lock that needs more of the low half for itself (pvbounded's queue-head
// CPU) starts it higher and serves fewer CPUs (kMaxCpus: cpu + 1 must fit).
// The shared slow path takes the layout from its hooks (TailOf below).
template <u32 kIdxOffsetV>
struct TailAt {
  static constexpr u32 kIdxOffset = kIdxOffsetV;
  static constexpr u32 kIdxMask = ((1u << kTailIdxBits) - 1) << kIdxOffset;
  static constexpr u32 kCpuOffset = kIdxOffset + kTailIdxBits;
  static constexpr u32 kCpuBits = 32 - kCpuOffset;
  static constexpr u32 kCpuMask = ((1u << kCpuBits) - 1) << kCpuOffset;
  static constexpr u32 kMask = kIdxMask | kCpuMask;
  static constexpr unsigned kMaxCpus = (1u << kCpuBits) - 1;
};
using QTail = TailAt<kPendingOffset + kPendingBits>;  // 16

inline constexpr u32 kTailIdxOffset = QTail::kIdxOffset;  // 16
inline constexpr u32 kTailIdxMask = QTail::kIdxMask;
inline constexpr u32 kTailCpuOffset = QTail::kCpuOffset;  // 18
inline constexpr u32 kTailCpuBits = QTail::kCpuBits;      // 14
inline constexpr u32 kTailCpuMask = QTail::kCpuMask;
inline constexpr u32 kTailMask = QTail::kMask;
inline constexpr u32 kLockedPendingMask = kLockedMask | kPendingMask;

// Bounded wait for a pending->locked hand-over in progress (0,1,0 -> 0,0,1).
// Linux defaults to 1; x86 uses 1 << 9 (arch/x86/include/asm/qspinlock.h).
inline constexpr unsigned kPendingLoops = 1u << 9;

static_assert(kMaxCpus <= QTail::kMaxCpus, "tail cpu field too small for kMaxCpus");
static_assert(kMaxNodes == (1u << kTailIdxBits), "one tail idx per nesting level");
static_assert((kTailMask | kLockedPendingMask) == 0xffffffffu && (kTailMask & kLockedPendingMask) == 0,
              "fields cover the word");

// The lock word.  All-zero is the unlocked state (trivially constructible,
// usable as a plain object in shared memory).
struct QSpinWord {
  u32 val;

  // Byte 0 (the locked byte) as seen by Env::wait() (both x86-64 and RV64 are
  // little-endian; clear_locked_release() asserts it).
  volatile u8* locked_byte() { return reinterpret_cast<volatile u8*>(&val); }
};
static_assert(sizeof(QSpinWord) == 4);

// ---- MCS queue node ---------------------------------------------------------
// PV state of a queue node (qspinlock_paravirt.h's enum vcpu_state):
//   running  spinning on node->locked (or on the lock word when head)
//   halted   suspended in Env::wait(&state, halted); only pv_wait_node sets it
//   hashed   halted AND entered in the PV hash table (by pv_kick_node or by
//            the head itself), so the unlocker will find and kick it
enum NodeState : u8 { kVcpuRunning = 0, kVcpuHalted = 1, kVcpuHashed = 2 };

// One node per (CPU, nesting level).  mcs fields + the PV fields overlay
// Linux's `struct pv_node`.  Native locks simply ignore cpu/state.
struct QNode {
  QNode* next;   // successor in the MCS queue (written by the successor)
  u32 locked;    // 1 = "you are the queue head now" (written by predecessor)
  u32 count;     // nesting depth; only meaningful in node[0] of each CPU
  u32 cpu;       // owner CPU (PV: who to kick)
  u8 state;      // NodeState (PV only)
};

struct alignas(kCacheLine) QNodeSet {
  QNode nodes[kMaxNodes];
};
static_assert(sizeof(QNode) <= 32);
static_assert(sizeof(QNodeSet) == 2 * kCacheLine, "4 PV-sized nodes = two cache lines per CPU");

// Static per-CPU node storage, one pool per Env (shared by all qspinlock-family
// locks of that Env, like Linux's per-CPU qnodes[]).  Zero-initialised .bss.
template <class Env>
struct QNodePool {
  static inline QNodeSet sets[kMaxCpus];

  static QNode* node(unsigned cpu, unsigned idx) { return &sets[cpu].nodes[idx]; }
  // Nesting counter of `cpu` (tests may pre-set it to simulate nesting).
  static u32* nesting(unsigned cpu) { return &sets[cpu].nodes[0].count; }
  // The CPU whose set holds `n`, from its address alone: no load of the
  // node's line, which its CPU may be spinning on.
  static unsigned cpu_of(const QNode* n) {
    const auto offset = reinterpret_cast<const char*>(n) - reinterpret_cast<const char*>(sets);
    return static_cast<unsigned>(offset / static_cast<long>(sizeof(QNodeSet)));
  }
};

// ---- Tail encoding ----------------------------------------------------------
template <class Tail = QTail>
[[gnu::always_inline]] inline constexpr u32 encode_tail(unsigned cpu, unsigned idx) {
  return ((cpu + 1) << Tail::kCpuOffset) | (idx << Tail::kIdxOffset);
}
template <class Tail = QTail>
[[gnu::always_inline]] inline constexpr unsigned tail_cpu(u32 tail) {
  return ((tail & Tail::kCpuMask) >> Tail::kCpuOffset) - 1;
}
template <class Tail = QTail>
[[gnu::always_inline]] inline constexpr unsigned tail_idx(u32 tail) {
  return (tail & Tail::kIdxMask) >> Tail::kIdxOffset;
}
template <class Env, class Tail = QTail>
[[gnu::always_inline]] inline QNode* decode_tail(u32 tail) {
  return QNodePool<Env>::node(tail_cpu<Tail>(tail), tail_idx<Tail>(tail));
}
static_assert(tail_cpu(encode_tail(127, 3)) == 127 && tail_idx(encode_tail(127, 3)) == 3);

// The slow path's tail layout: Hooks::Tail where the hooks name one, else
// qspinlock's.
template <class Hooks>
struct TailOf {
  using type = QTail;
};
template <class Hooks>
  requires requires { typename Hooks::Tail; }
struct TailOf<Hooks> {
  using type = typename Hooks::Tail;
};

// ---- Word helpers -----------------------------------------------------------
// Each comment ends with the transition it performs.

[[gnu::always_inline]] inline u32 read(const QSpinWord* l) { return load_relaxed(&l->val); }
[[gnu::always_inline]] inline u32 read_acquire(const QSpinWord* l) { return load_acquire(&l->val); }

// Whole-word trylock (queued_spin_trylock): only from the empty state, so a
// trylock never jumps a queue or a pending waiter.   0,0,0 -> 0,0,1
// Acquire pairs with the release in the unlock helpers.
[[gnu::always_inline]] inline bool trylock_word(QSpinWord* l) {
  u32 v = read(l);
  if (v != 0) return false;
  return try_cmpxchg(&l->val, &v, kLockedVal, Order::acquire);
}

// Set the pending bit, returning the old word (queued_fetch_set_pending_acquire).
//   *,*,* -> *,1,*
// Acquire: if this makes us the owner-to-be, the eventual acquisition of the
// locked byte is ordered after it; pairs with unlock's release.
[[gnu::always_inline]] inline u32 fetch_set_pending_acquire(QSpinWord* l) {
  return fetch_or(&l->val, kPendingVal, Order::acquire);
}

// Set the pending bit (PV head while it spins).   *,*,* -> *,1,*
[[gnu::always_inline]] inline void set_pending(QSpinWord* l) {
  fetch_or(&l->val, kPendingVal, Order::relaxed);
}

// Clear the pending bit.   *,1,* -> *,0,*
[[gnu::always_inline]] inline void clear_pending(QSpinWord* l) {
  fetch_and(&l->val, ~kPendingMask, Order::relaxed);
}

// Take the lock from the pending position.  Caller guarantees (*,1,0): only
// the pending owner may do this, and no stealer is allowed while pending is
// set, so a single add is exact.   *,1,0 -> *,0,1
// Acquire pairs with the release of the unlock we waited for.
[[gnu::always_inline]] inline void clear_pending_set_locked(QSpinWord* l) {
  fetch_add(&l->val, kLockedVal - kPendingVal, Order::acquire);
}

// Exchange the tail, keeping pending/locked.  Returns the old word.
//   p,*,* -> n,*,*
// acq_rel: release publishes our node's initialisation (next = null,
// locked = 0) to the CPU that will read our tail and link behind us; acquire
// makes the predecessor's node initialisation visible before we write
// prev->next.  Pairs with the xchg_tail of our predecessor / successor.
template <class Tail = QTail>
[[gnu::always_inline]] inline u32 xchg_tail(QSpinWord* l, u32 tail) {
  u32 old = read(l);
  while (!try_cmpxchg(&l->val, &old, (old & ~Tail::kMask) | tail, Order::acq_rel)) {
  }
  return old;
}

// Emulated byte cmpxchg on the locked byte: if locked == `from`, set it to
// `to` and return `from`; otherwise return the locked byte seen.  Other fields
// are preserved.   *,*,from -> *,*,to
[[gnu::always_inline]] inline u8 cmpxchg_locked(QSpinWord* l, u8 from, u8 to, Order o) {
  // A failed cmpxchg_acquire still orders later loads: read with acquire
  // whenever `o` has acquire semantics (failures re-read via try_cmpxchg's
  // failure order, which is acquire for those orders too).
  const bool acq = o == Order::acquire || o == Order::acq_rel || o == Order::seq_cst;
  u32 v = acq ? read_acquire(l) : read(l);
  for (;;) {
    u8 cur = static_cast<u8>(v & kLockedMask);
    if (cur != from) return cur;
    if (try_cmpxchg(&l->val, &v, (v & ~kLockedMask) | to, o)) return from;
  }
}

// Emulated byte xchg on the locked byte.   *,*,x -> *,*,to (returns x)
[[gnu::always_inline]] inline u8 xchg_locked(QSpinWord* l, u8 to, Order o) {
  u32 v = read(l);
  while (!try_cmpxchg(&l->val, &v, (v & ~kLockedMask) | to, o)) {
  }
  return static_cast<u8>(v & kLockedMask);
}

// Release the lock: clear the locked byte, keep pending and tail.
//   *,*,1 -> *,*,0
// Release pairs with the acquire of whoever takes the lock next (queue head's
// acquisition cmpxchg, pending owner's wait, trylock).
//
// On x86 a byte store is single-copy atomic and, under TSO, a release: like
// Linux's queued_spin_unlock (smp_store_release on the locked byte), the
// uncontended unlock needs no locked instruction. It cannot clobber a
// concurrent pending/tail update, because every other writer of the word
// uses an atomic RMW (cmpxchg loops, fetch_or/fetch_and) that either sees
// the new byte or retries. RISC-V is the same: the release store is
// `fence rw,w; sb` (Linux's RISC-V qspinlock unlocks the same way), RVWMO
// defines mixed-size accesses byte by byte, and a byte store by another hart
// inside an LR/SC's reserved word makes the SC fail, so the RMW loop retries;
// a 32-bit AMO (fetch_or/fetch_and) is single-copy atomic with it.
// ThreadSanitizer has no model of mixed-size atomics, so TSan builds keep the
// 32-bit RMW (the cost noted above).
[[gnu::always_inline]] inline void clear_locked_release(QSpinWord* l) {
#if defined(__SANITIZE_THREAD__)
  fetch_and(&l->val, ~kLockedMask, Order::release);
#else
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the locked byte is byte 0 of the word");
  __atomic_store_n(reinterpret_cast<u8*>(&l->val), u8{0}, __ATOMIC_RELEASE);
#endif
}

// Queue head takes the lock once locked and pending are both clear.  If we
// are also the tail, clear the tail too (no successor; our node is free).
//   n,0,0 -> 0,0,1  (n == our tail)        n,0,0 -> n,0,1  (otherwise)
// Uses a cmpxchg (not a blind byte store like Linux's set_locked) so that it
// composes with lock stealers (unfair lock) that may take the locked byte
// between our read and our write.  Returns true if the tail was ours.
// Acquire pairs with the release in clear_locked_release()/clear_pending paths.
// (With another tail layout "pending" is every bit below the tail.)
template <class Env, class Tail = QTail>
[[gnu::always_inline]] inline bool head_acquire(QSpinWord* l, u32 tail) {
  for (;;) {
    u32 v = read_acquire(l);
    while (v & ~Tail::kMask) {
      spin_relax<Env>();
      v = read_acquire(l);
    }
    if ((v & Tail::kMask) == tail) {
      if (try_cmpxchg(&l->val, &v, kLockedVal, Order::acquire)) return true;
    } else {
      if (try_cmpxchg(&l->val, &v, v | kLockedVal, Order::acquire)) return false;
    }
  }
}

// ---- MCS node helpers -----------------------------------------------------

// Link behind the predecessor.  Release publishes our node to prev, which
// reads it with load_next_acquire() to hand the lock over.
[[gnu::always_inline]] inline void link_prev(QNode* prev, QNode* node) {
  store_release(&prev->next, node);
}
[[gnu::always_inline]] inline QNode* load_next_acquire(QNode* node) {
  return load_acquire(&node->next);
}

// Hand queue-headship to `next` (arch_mcs_spin_unlock_contended).  Release
// pairs with the acquire in wait_node_locked(): everything the old head did
// (including taking the lock) is visible to the new head.
[[gnu::always_inline]] inline void mcs_pass(QNode* next) { store_release(&next->locked, u32{1}); }

// Spin until we are the queue head (arch_mcs_spin_lock_contended).
template <class Env>
[[gnu::always_inline]] inline void wait_node_locked(QNode* node) {
  while (!load_acquire(&node->locked)) spin_relax<Env>();
}

}  // namespace lockvisor::locks::q
