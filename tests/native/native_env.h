// native_env.h: the lock Env of the native lock tests.
//
// The implementation is vmm/native/native_env.h (shared with the native
// benchmark runner); the tests use it with their own defaults: virtualised,
// PV available, and relax() modelling KVM pause-loop exiting (a
// sched_yield() every 32 pauses), so fair locks hand off quickly when there
// are more threads than host cores.  See the vmm header for the wait/kick
// semantics and the counters.
#pragma once

#include "vmm/native/native_env.h"

namespace lockvisor::test {

using lockvisor::locks::kLockEventCount;
using lockvisor::locks::kMaxCpus;
using lockvisor::locks::LockEvent;
using lockvisor::locks::LockEvents;
using lockvisor::locks::u32;
using lockvisor::locks::u64;
using lockvisor::locks::u8;
using lockvisor::native::EnvStats;

inline constexpr unsigned kTestPleWindow = 32;

template <int kTag, bool kPv = true, bool kVirt = true, bool kDedicated = false>
using NativeEnvT = native::NativeEnvT<kTag, kPv, kVirt, kDedicated, kTestPleWindow>;

// The default Env of the typed tests: virtualised, PV available, 8 CPUs.
using NativeEnv = NativeEnvT<0>;
static_assert(locks::LockEnv<NativeEnv>);

}  // namespace lockvisor::test
