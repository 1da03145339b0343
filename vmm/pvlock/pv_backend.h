// The host side of the PV-lock interface, as the vCPU exit loop sees it.
//
// The hypercall table (hypercall_table.h) decodes a hypercall and calls one
// of these; the exit loop calls halt(). How a kick reaches a halted vCPU is
// the backend's business, and so is how it keeps that state: callers see it
// only through the neutral VcpuPvState. Today there is one
// backend, UserspaceBackend (kick latches in the VMM, halts handled in
// userspace). KVM's in-kernel KICK_CPU (vmcall + in-kernel irqchip) on
// hardware hosts is the planned second one: it would never see these calls
// for KICK_CPU at all and would only have to answer prepare-time questions.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "vmm/pvlock/pv_types.h"

namespace lockvisor::pvlock {

enum class KickResult { kDelivered, kCoalesced, kDropped, kNoSuchTarget, kDisabled };

// Per-vCPU counters. Written by the vCPU's own thread (sent, halts) or by a
// kicker (received); all relaxed atomics, read once at the end of a run.
struct VcpuPvCounters {
  std::atomic<std::uint64_t> halts{0};            // halt requests (hlt or HALT hypercall)
  std::atomic<std::uint64_t> halts_immediate{0};  // returned at once: a kick was pending
  std::atomic<std::uint64_t> halts_polled{0};     // kick arrived while polling
  std::atomic<std::uint64_t> halts_woken{0};      // slept, then woken by a kick
  std::atomic<std::uint64_t> kicks_sent{0};       // KICK_CPU calls made by this vCPU
  std::atomic<std::uint64_t> kicks_invalid{0};    // ... naming a target that does not exist
  std::atomic<std::uint64_t> kicks_received{0};   // kicks that set this vCPU's latch
  std::atomic<std::uint64_t> kicks_coalesced{0};  // kicks that found a kick already pending here
  std::atomic<std::uint64_t> kicks_dropped{0};    // kicks lost here (lossy mode, not halted)
  std::atomic<std::uint64_t> last_kick_ns{0};     // when the latest kick was delivered (steady clock)
};

struct BackendOptions {
  KickMode mode = KickMode::kSticky;
  std::uint32_t kick_delay_us = 0;  // kicker waits this long before delivering
  std::uint32_t halt_poll_us = 0;   // halter spins this long before sleeping
};

// One vCPU's PV state as the deadlock detector and the reports see it, read
// in one consistent snapshot.
struct VcpuPvState {
  bool halted = false;        // blocked (or polling) in halt()
  bool kick_pending = false;  // a kick arrived that no halt has consumed yet
};

class PvBackend {
 public:
  virtual ~PvBackend() = default;
  virtual std::string_view name() const = 0;
  // Kick vCPU `target` (an index, or -1 when the guest named no vCPU).
  virtual KickResult kick(unsigned from, int target) = 0;
  // Halt vCPU `self` until kicked.
  virtual HaltOutcome halt(unsigned self) = 0;
  // Wake every halted vCPU for good: the run is ending.
  virtual void stop() = 0;
  // For the deadlock detector and reports.
  virtual VcpuPvState vcpu_state(unsigned vcpu) const = 0;
  bool is_halted(unsigned vcpu) const { return vcpu_state(vcpu).halted; }
  bool kick_pending(unsigned vcpu) const { return vcpu_state(vcpu).kick_pending; }
  // Changes whenever any vCPU's state does: two equal reads around a scan of
  // vcpu_state() mean the scan saw one stable picture.
  virtual std::uint64_t epoch() const = 0;
  virtual const VcpuPvCounters& counters(unsigned vcpu) const = 0;
  // Kick-to-wake latencies (ns) observed by vCPU `vcpu`'s woken halts.
  virtual std::vector<std::uint64_t> wake_latencies(unsigned vcpu) const = 0;
};

// The backend a Machine runs with. Today always the userspace one.
std::unique_ptr<PvBackend> make_backend(unsigned vcpu_count, BackendOptions options);

}  // namespace lockvisor::pvlock
