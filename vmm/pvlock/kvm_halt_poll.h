// --halt-poll for the in-kernel (kvm) backend: KVM_CAP_HALT_POLL on the VM fd.
//
// KVM polls in kvm_vcpu_halt() with its own adaptive window (the algorithm
// halt_poll.h reproduces for the userspace backend); the capability sets the
// VM's maximum window (max_halt_poll_ns), overriding the module parameter.
// KVM has no fixed window: fixed:US is applied as adaptive:US (the window
// grows to US after a few short blocks), and the returned description says so.
#pragma once
#include <string>

#include "vmm/pvlock/halt_poll.h"

namespace lockvisor::pvlock {

// Enables KVM_CAP_HALT_POLL on `vm_fd` for `setting`; returns what was applied
// ("max_halt_poll_ns=200000"). Throws lockvisor::Error (host, exit 6) with one
// line when the kernel refuses (the capability needs Linux 5.18).
std::string apply_kvm_halt_poll(int vm_fd, const HaltPollSetting& setting);

}  // namespace lockvisor::pvlock
