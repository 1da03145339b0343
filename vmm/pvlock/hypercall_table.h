// Hypercall decoding and dispatch, out of the exit loop (hypercalls/README.md,
// "Calls"). Modelled on kvmtool's powerpc/spapr_hcall.c: a table of handlers
// keyed by (transport, number), each registered once; a number nobody
// registered gets the transport's "unknown" answer and is counted.
//
// Inputs and outputs are neutral (no kvm_regs, no vCPU thread): the exit loop
// copies the argument registers in, writes the result registers back and
// performs a halt when asked to. Unit tests drive the table without /dev/kvm.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "vmm/pvlock/pv_backend.h"

namespace lockvisor::pvlock {

enum class Transport : unsigned {
  kKvm,  // port 0xE4: KVM hypercall convention, number in RAX
  kSbi,  // port 0xE5: SBI convention, EID in RAX (a7), FID in RBX (a6)
  kCount
};

// The argument registers of one call and who made it.
struct HypercallInput {
  std::uint64_t rax = 0;
  std::uint64_t rbx = 0;
  std::uint64_t rcx = 0;
  std::uint64_t rdx = 0;
  std::uint64_t rsi = 0;
  unsigned caller = 0;  // vCPU index
};

// What the call answers: result registers, and whether the caller must halt
// (until kicked, or for at most halt_limit_ns when nonzero: HALT_FOR, whose
// RAX becomes kHaltForExpired when the limit ends the halt) before it runs on.
struct HypercallOutput {
  std::uint64_t rax = 0;
  std::optional<std::uint64_t> rbx;  // written back only when set
  bool halt = false;
  std::uint64_t halt_limit_ns = 0;
};

// The decoded call: its table key and the handler's answer.
struct HypercallResult {
  std::uint64_t number = 0;  // KVM: RAX; SBI: EID << 32 | FID
  bool known = false;        // a registered handler answered
  HypercallOutput output;
};

// Which calls are on (MachineConfig's PV settings).
struct HypercallConfig {
  bool pv_unhalt = true;                  // PV_UNHALT advertised in CPUID
  bool sbi_pvlock = true;                 // SBI PVLOCK is present
  std::uint32_t sbi_experimental_eid = 0;  // the experimental-range alias of the PVLOCK EID
  // With PV_UNHALT hidden: refuse KICK_CPU (-KVM_ENOSYS, nobody woken) as KVM
  // does with KVM_CAP_ENFORCE_PV_FEATURE_CPUID; false: kick anyway, as KVM
  // does without it.
  bool enforce_pv_feature_cpuid = true;
  // --sbi-kick proposed: an SBI kick to a vCPU that is not halted is lost
  // (the RISC-V host patch: kvm_vcpu_kick + yield); false: sticky, like KVM's
  // pv_unhalted (or lossy with --kick lossy).
  bool sbi_kick_proposed = false;
};

// APIC ID (= hart ID) → vCPU index, -1 when no vCPU has it.
using ApicToIndex = std::function<int(std::uint64_t apic_id)>;

class HypercallTable {
 public:
  using Handler = std::function<HypercallOutput(const HypercallInput&)>;

  // The table key of a call: KVM's number, or SBI's (EID, FID) pair.
  static std::uint64_t number_of(Transport transport, const HypercallInput& in);
  static constexpr std::uint64_t sbi_number(std::uint32_t eid, std::uint32_t fid) {
    return (std::uint64_t{eid} << 32) | fid;
  }

  // Throws std::logic_error if (transport, number) already has a handler.
  void register_handler(Transport transport, std::uint64_t number, Handler handler);
  bool registered(Transport transport, std::uint64_t number) const;
  std::size_t size() const { return handlers_.size(); }

  // Decodes and answers one call. Safe from every vCPU thread at once once
  // registration is over (handlers are only read).
  HypercallResult dispatch(Transport transport, const HypercallInput& in) const;

  // Calls no handler answered, per transport.
  std::uint64_t unknown_calls(Transport transport) const {
    return unknown_[static_cast<std::size_t>(transport)].load(std::memory_order_relaxed);
  }

 private:
  std::map<std::pair<Transport, std::uint64_t>, Handler> handlers_;
  mutable std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(Transport::kCount)> unknown_{};
};

// The PV-lock table: KICK_CPU, HALT, QUERY_HALTED and YIELD_TO on the KVM transport;
// Base PROBE_EXTENSION and PVLOCK KICK_CPU (each of its EIDs) on SBI.
// `backend` and `apic_to_index` must outlive the table.
std::unique_ptr<HypercallTable> make_pv_hypercall_table(PvBackend& backend, HypercallConfig config,
                                                        ApicToIndex apic_to_index);

}  // namespace lockvisor::pvlock
