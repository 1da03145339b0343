// registry.h: the list of lock algorithms, by name.
//
// ADDING A LOCK = one header + one line here:
//   1. guest/locks/<name>.h with `template <class Env> class XxxLock` that has
//      lock/unlock/try_lock/is_locked, kName and kDescription (it must model
//      the Lock concept in lock_env.h; the static_assert below checks) and
//      its traits `static constexpr bool kNeedsPv` (it halts with Env::wait
//      whether or not Env::pv_available(): a run must not pick it without
//      PV wait/kick) and `kFair` (waiters get the lock in arrival order);
//   2. one X(id, XxxLock, "name") row in LOCKVISOR_LOCKS below (and its
//      #include).  The name table, the dispatcher, the typed host tests and
//      anything else iterating the list pick it up from there.
//
// Usage:
//   bool ok = lockvisor::locks::with_lock_type<MyEnv>("pvqspinlock",
//       [&]<class L>() { run_benchmark<L>(); });      // false: unknown name
//
// busted.h (the deliberately broken lock) is never listed here.
#pragma once

#include "locks/auto_policy.h"
#include "locks/cna.h"
#include "locks/hq.h"
#include "locks/lock_env.h"
#include "locks/pv_cna.h"
#include "locks/pv_confer.h"
#include "locks/pv_qspinlock.h"
#include "locks/pv_ticket.h"
#include "locks/pvbounded.h"
#include "locks/qspinlock.h"
#include "locks/tas.h"
#include "locks/tas_backoff.h"
#include "locks/ticket.h"
#include "locks/unfair_qspinlock.h"

// X(id, Type, "name"): Type is a class template taking the Env first (other
// template parameters must have defaults).
// clang-format off
#define LOCKVISOR_LOCKS(X)                       \
  X(ticket,      TicketLock,      "ticket")      \
  X(qspinlock,   QSpinLock,       "qspinlock")   \
  X(unfair,      UnfairQSpinLock, "unfair")      \
  X(tas,         TasLock,         "tas")         \
  X(tas_backoff, TasBackoffLock,  "tas-backoff") \
  X(pvqspinlock, PvQSpinLock,     "pvqspinlock") \
  X(pvticket,    PvTicketLock,    "pvticket")    \
  X(pvbounded,   PvBoundedLock,   "pvbounded")   \
  X(cna,         CnaLock,         "cna")         \
  X(pvcna,       PvCnaLock,       "pvcna")       \
  X(hq,          HqLock,          "hq")          \
  X(pvhq,        PvHqLock,        "pvhq")        \
  X(pvconfer,    PvConferLock,    "pvconfer")    \
  X(auto_,       AutoLock,        "auto")
// clang-format on

namespace lockvisor::locks {

enum class LockId : unsigned {
#define LOCKVISOR_X_ID_(id, Type, name) id,
  LOCKVISOR_LOCKS(LOCKVISOR_X_ID_)
#undef LOCKVISOR_X_ID_
  count_
};

inline constexpr unsigned kLockCount = static_cast<unsigned>(LockId::count_);

struct LockInfo {
  const char* name;
  const char* description;
  bool needs_pv;  // Type::kNeedsPv: only usable with PV wait/kick
  bool fair;      // Type::kFair: FIFO, no bypassing
};

namespace detail {
// Any Env will do to read the constexpr name/description.
struct NameOnlyEnv;

constexpr bool streq(const char* a, const char* b) {
  while (*a && *a == *b) {
    a++;
    b++;
  }
  return *a == *b;
}

// Drops the leading placeholder of a list built by the X-macro below, so
// rows can be expanded as ", Type<Env>" without a trailing-comma problem.
template <template <class...> class List, class First, class... Rest>
struct DropFirst {
  using type = List<Rest...>;
};
}  // namespace detail

inline constexpr LockInfo kLocks[kLockCount] = {
#define LOCKVISOR_X_INFO_(id, Type, name) \
  {name, Type<detail::NameOnlyEnv>::kDescription, Type<detail::NameOnlyEnv>::kNeedsPv,    \
   Type<detail::NameOnlyEnv>::kFair},
    LOCKVISOR_LOCKS(LOCKVISOR_X_INFO_)
#undef LOCKVISOR_X_INFO_
};

// The registry name is the lock's own kName.
#define LOCKVISOR_X_CHECK_(id, Type, name) \
  static_assert(detail::streq(Type<detail::NameOnlyEnv>::kName, name), "registry name != kName");
LOCKVISOR_LOCKS(LOCKVISOR_X_CHECK_)
#undef LOCKVISOR_X_CHECK_

// All registry lock types for one Env, as List<Types...> (e.g. a
// ::testing::Types or your own type list).
#define LOCKVISOR_X_TYPE_(id, Type, name) , Type<Env>
template <template <class...> class List, class Env>
using LockTypes = typename detail::DropFirst<List, void LOCKVISOR_LOCKS(LOCKVISOR_X_TYPE_)>::type;
#undef LOCKVISOR_X_TYPE_

// Every registry lock models the Lock concept (checked per Env on use).
template <class Env>
constexpr bool all_model_lock() {
#define LOCKVISOR_X_CONCEPT_(id, Type, name) static_assert(Lock<Type<Env>>, name " does not model Lock");
  LOCKVISOR_LOCKS(LOCKVISOR_X_CONCEPT_)
#undef LOCKVISOR_X_CONCEPT_
  return true;
}

// Name -> info; nullptr if unknown.
constexpr const LockInfo* find_lock(const char* name) {
  for (const LockInfo& l : kLocks)
    if (detail::streq(l.name, name)) return &l;
  return nullptr;
}

// Calls f.template operator()<Type<Env>>() for the lock named `name`.
// Returns false (and does not call f) if the name is unknown.
template <class Env, class F>
bool with_lock_type(const char* name, F&& f) {
  static_assert(all_model_lock<Env>());
#define LOCKVISOR_X_DISPATCH_(id, Type, str) \
  if (detail::streq(name, str)) {            \
    f.template operator()<Type<Env>>();      \
    return true;                             \
  }
  LOCKVISOR_LOCKS(LOCKVISOR_X_DISPATCH_)
#undef LOCKVISOR_X_DISPATCH_
  return false;
}

}  // namespace lockvisor::locks
