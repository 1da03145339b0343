// What a vCPU's thread tells whoever watches it closely (the timeline): each
// guest interval, each exit, each VMM-side halt and each park, as they happen.
//
// Every call is made on the vCPU's own thread, in order, with CLOCK_MONOTONIC
// nanoseconds (vmm/util/monotonic_clock.h); an observer keeps per-vCPU state
// without locks. Without an observer the loop reads no clock and calls
// nothing: the cost of watching is paid only when something watches.
#pragma once
#include <cstdint>

#include "vmm/devices/exit_kind.h"
#include "vmm/machine/vcpu_park.h"

namespace lockvisor::machine {

class VcpuObserver {
 public:
  virtual ~VcpuObserver() = default;
  // One KVM_RUN: the guest (or KVM on its behalf) had the CPU from
  // `entered` to `left`.
  virtual void guest_ran(std::uint64_t entered, std::uint64_t left) = 0;
  // The exit that ended that KVM_RUN, handled from `left` to `done`.
  virtual void exit_handled(devices::ExitKind kind, std::uint64_t left, std::uint64_t done) = 0;
  // A VMM-side halt is about to block, and how long it lasted.
  virtual void halt_begins() = 0;
  virtual void halted(std::uint64_t begin, std::uint64_t end) = 0;
  // The vCPU was held out of the guest (vcpu_park.h).
  virtual void parked(const ParkInterval& interval) = 0;
};

}  // namespace lockvisor::machine
