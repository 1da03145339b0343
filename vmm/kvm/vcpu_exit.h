// One exit of a vCPU, decoded from its kvm_run page into plain values.
//
// KVM fills kvm_run, but the VMM trusts none of it blindly: a port I/O exit
// whose data would lie outside the kvm_run mapping, or an MMIO exit longer
// than its 8-byte buffer, is reported as malformed instead of being followed.
// Decoding is a pure function over the page (no ioctl, no vCPU), so unit
// tests drive every kind without /dev/kvm; acting on the exit is the job of
// the I/O bus's devices (vmm/devices/io_bus.h) and the vCPU loop (vmm/machine/vcpu_runner.h).
#pragma once
#include <linux/kvm.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace lockvisor::kvm {

struct VcpuExit {
  enum class Kind {
    kPortIo,       // io: an in/out (string forms included: count > 1)
    kMmio,         // mmio: an access to a guest-physical address no memslot covers
    kHalt,         // hlt without an in-kernel local APIC
    kShutdown,     // triple fault
    kSystemEvent,  // system_event: shutdown, reset or crash requested through KVM
    kIntr,         // KVM_EXIT_INTR
    kInternalError,
    kFailEntry,
    kMalformed,    // KVM's fields contradict each other: `what` says how
    kUnknown,      // any other exit_reason (`reason`)
  };
  struct PortIo {
    std::uint16_t port = 0;
    std::uint8_t size = 0;     // bytes per access: 1, 2 or 4
    std::uint32_t count = 0;   // accesses (rep ins/outs)
    bool write = false;        // out (guest to device)
    std::span<std::uint8_t> data;  // size * count bytes inside kvm_run
  };
  struct Mmio {
    std::uint64_t gpa = 0;
    std::uint32_t len = 0;
    bool write = false;
    std::span<std::uint8_t> data;  // len bytes inside kvm_run
  };

  Kind kind = Kind::kUnknown;
  PortIo io;
  Mmio mmio;
  std::uint32_t system_event = 0;  // KVM_SYSTEM_EVENT_*
  std::uint32_t suberror = 0;      // internal error
  std::uint64_t hardware_reason = 0;  // failed entry
  std::uint32_t reason = 0;        // exit_reason as KVM gave it
  std::string what;                // kMalformed: one line
};

// `run` is the vCPU's kvm_run mapping, `run_bytes` its size
// (KVM_GET_VCPU_MMAP_SIZE): the port I/O data must lie inside it.
VcpuExit decode_exit(kvm_run& run, std::size_t run_bytes);

}  // namespace lockvisor::kvm
