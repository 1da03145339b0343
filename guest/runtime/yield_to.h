// YIELD_TO (hypercall 11, KVM's KVM_HC_SCHED_YIELD number): ask the host to
// run vCPU `apic_id` next, e.g. the lock holder or the waiter a lock was just
// handed to. lockvisor's userspace backend boosts it on its host CPU until it
// next halts, kicks or yields, or one host slice passes (docs/boost.md).
// The call goes through the KVM doorbell (runtime/doorbell.h, .text.doorbell):
// an exit, so callers use it where a wait is expected to be long.
#pragma once
#include "lockvisor/abi/kvm_hypercall.h"
#include "runtime/doorbell.h"

namespace guest {

inline i64 yield_to_apic(u32 apic_id) { return kvm_hypercall(kHcSchedYield, apic_id); }

}  // namespace guest
