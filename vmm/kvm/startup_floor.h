// The bare-KVM floor of start-up: the fewest steps that take a process from
// nothing to a guest instruction and back (open the KVM device, create a VM,
// one memory slot, the vCPUs, one KVM_RUN to the first exit), timed step by
// step. `lockvisor bench` measures it beside the VMM's own start-up, in the
// same run and with the same memory size and vCPU count, so that the ratio
// says how much the VMM adds on this host, now.
#pragma once
#include <cstdint>

namespace lockvisor::kvm {

// Milliseconds since the sequence began (before the device was opened).
struct FloorTimes {
  double opened = 0;       // the KVM device is open
  double vm_created = 0;   // KVM_CREATE_VM returned
  double memory = 0;       // guest memory mapped, its code written, slot 0 set
  double vcpus = 0;        // every vCPU created, its kvm_run mapped, vCPU 0's registers set
  double first_entry = 0;  // just before vCPU 0's first KVM_RUN
  double first_exit = 0;   // that KVM_RUN returned with the guest's first exit
  // Minor page faults the thread took from the start to just before that
  // KVM_RUN (the code page, KVM's own on our behalf).
  std::uint64_t page_faults = 0;
};

// Runs the sequence once: `memory_bytes` of guest RAM (a multiple of 4 KiB),
// `vcpus` vCPUs, of which vCPU 0 runs one `out` instruction in real mode and
// exits (KVM_EXIT_IO). Throws a host lockvisor::Error when a step fails or
// the guest exits any other way.
FloorTimes measure_startup_floor(std::uint64_t memory_bytes, unsigned vcpus);

}  // namespace lockvisor::kvm
