#include "vmm/pvlock/hypercall_table.h"

#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "lockvisor/abi/kvm_hypercall.h"
#include "lockvisor/abi/sbi_pvlock.h"

namespace lockvisor::pvlock {
namespace abi = lockvisor::abi;

namespace {

const char* transport_name(Transport transport) { return transport == Transport::kKvm ? "KVM" : "SBI"; }

// The answer to a number nobody registered.
HypercallOutput unknown_answer(Transport transport) {
  if (transport == Transport::kKvm) return {static_cast<std::uint64_t>(abi::kKvmEnosys), std::nullopt, false};
  return {static_cast<std::uint64_t>(abi::kSbiErrNotSupported), 0, false};
}

HypercallOutput kvm_answer(std::int64_t rax, bool halt = false) {
  return {static_cast<std::uint64_t>(rax), std::nullopt, halt};
}
HypercallOutput sbi_answer(std::int64_t error, std::int64_t value = 0) {
  return {static_cast<std::uint64_t>(error), static_cast<std::uint64_t>(value), false};
}

}  // namespace

std::uint64_t HypercallTable::number_of(Transport transport, const HypercallInput& in) {
  if (transport == Transport::kKvm) return in.rax;
  return sbi_number(static_cast<std::uint32_t>(in.rax), static_cast<std::uint32_t>(in.rbx));
}

void HypercallTable::register_handler(Transport transport, std::uint64_t number, Handler handler) {
  if (transport >= Transport::kCount) throw std::logic_error("hypercall table: no such transport");
  if (!handler) throw std::logic_error(fmt::format("{} hypercall {:#x}: empty handler", transport_name(transport), number));
  if (!handlers_.emplace(std::pair{transport, number}, std::move(handler)).second)
    throw std::logic_error(fmt::format("{} hypercall {:#x} registered twice", transport_name(transport), number));
}

bool HypercallTable::registered(Transport transport, std::uint64_t number) const {
  return handlers_.count({transport, number}) != 0;
}

HypercallResult HypercallTable::dispatch(Transport transport, const HypercallInput& in) const {
  HypercallResult result;
  result.number = number_of(transport, in);
  const auto it = handlers_.find({transport, result.number});
  if (it == handlers_.end()) {
    unknown_[static_cast<std::size_t>(transport)].fetch_add(1, std::memory_order_relaxed);
    result.output = unknown_answer(transport);
    return result;
  }
  result.known = true;
  result.output = it->second(in);
  return result;
}

std::unique_ptr<HypercallTable> make_pv_hypercall_table(PvBackend& backend, HypercallConfig config,
                                                        ApicToIndex apic_to_index) {
  auto table = std::make_unique<HypercallTable>();
  PvBackend* pv = &backend;
  auto to_index = std::make_shared<ApicToIndex>(std::move(apic_to_index));

  // ---- KVM convention, port 0xE4
  table->register_handler(Transport::kKvm, abi::kHcKickCpu, [pv, to_index, config](const HypercallInput& in) {
    // PV_UNHALT hidden and enforced: nobody is woken.
    if (!config.pv_unhalt && config.enforce_pv_feature_cpuid) return kvm_answer(abi::kKvmEnosys);
    // RBX (a0) is KVM's reserved flags word: ignored, as KVM does.
    pv->kick(in.caller, (*to_index)(in.rcx));
    return kvm_answer(abi::kKvmSuccess);  // KVM returns 0 even when no vCPU has that APIC ID
  });
  table->register_handler(Transport::kKvm, abi::kHcHalt, [](const HypercallInput&) {
    return kvm_answer(abi::kKvmSuccess, /*halt=*/true);  // available with PV on or off
  });
  table->register_handler(Transport::kKvm, abi::kHcHaltFor, [](const HypercallInput& in) {
    // a0 (RBX) = the limit in ns, from the guest: refused outside 1..max.
    if (in.rbx == 0 || in.rbx > abi::kHaltForMaxNs) return kvm_answer(abi::kKvmEinval);
    HypercallOutput out = kvm_answer(abi::kKvmSuccess, /*halt=*/true);
    out.halt_limit_ns = in.rbx;
    return out;
  });
  table->register_handler(Transport::kKvm, abi::kHcSchedYield, [pv, to_index](const HypercallInput& in) {
    // a0 (RBX) = the APIC ID to yield to; an unknown one is ignored and, as in
    // KVM, still answered 0 (the backend counts the call either way).
    pv->yield_to(in.caller, (*to_index)(in.rbx));
    return kvm_answer(abi::kKvmSuccess);
  });
  table->register_handler(Transport::kKvm, abi::kHcQueryHalted, [pv, to_index](const HypercallInput& in) {
    const int target = (*to_index)(in.rbx);
    if (target < 0) return kvm_answer(abi::kKvmEinval);
    const VcpuPvState state = pv->vcpu_state(static_cast<unsigned>(target));
    if (!state.known) return kvm_answer(abi::kKvmEopnotsupp);
    return kvm_answer(state.halted ? 1 : 0);
  });

  // ---- SBI convention, port 0xE5
  const auto is_pvlock_eid = [config](std::uint64_t id) {
    return id == abi::kSbiExtPvlock || id == abi::kSbiExtPvlockLegacy || id == config.sbi_experimental_eid;
  };
  table->register_handler(Transport::kSbi, HypercallTable::sbi_number(abi::kSbiExtBase, abi::kSbiBaseProbeExtension),
                          [config, is_pvlock_eid](const HypercallInput& in) {
                            return sbi_answer(abi::kSbiSuccess, (config.sbi_pvlock && is_pvlock_eid(in.rcx)) ? 1 : 0);
                          });
  const auto kick = [pv, to_index, config](const HypercallInput& in) {
    if (!config.sbi_pvlock) return sbi_answer(abi::kSbiErrNotSupported);
    const int target = (*to_index)(in.rcx);
    // -1: counted as an invalid kick.
    config.sbi_kick_proposed ? pv->kick_if_halted(in.caller, target) : pv->kick(in.caller, target);
    return sbi_answer(target < 0 ? abi::kSbiErrInvalidParam : abi::kSbiSuccess);
  };
  for (const std::uint32_t eid : {abi::kSbiExtPvlock, abi::kSbiExtPvlockLegacy, config.sbi_experimental_eid}) {
    const auto number = HypercallTable::sbi_number(eid, abi::kSbiPvlockKickCpu);
    // The alias is validated to the experimental range, so it never names a
    // fixed EID; should it, that EID is already there.
    if (!table->registered(Transport::kSbi, number)) table->register_handler(Transport::kSbi, number, kick);
  }
  return table;
}

}  // namespace lockvisor::pvlock
