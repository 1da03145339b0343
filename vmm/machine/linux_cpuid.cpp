#include "vmm/machine/linux_cpuid.h"

#include <bit>

namespace lockvisor::machine {

std::string_view guest_lock_name(GuestLockPolicy policy) {
  switch (policy) {
    case GuestLockPolicy::kPv: return "pv";
    case GuestLockPolicy::kTas: return "tas";
    case GuestLockPolicy::kNative: break;
  }
  return "native";
}

std::optional<GuestLockPolicy> parse_guest_lock(std::string_view name) {
  for (auto p : {GuestLockPolicy::kPv, GuestLockPolicy::kTas, GuestLockPolicy::kNative})
    if (guest_lock_name(p) == name) return p;
  return std::nullopt;
}

namespace {
constexpr std::uint32_t kKvmSignatureLeaf = 0x40000000;
constexpr std::uint32_t kKvmFeaturesLeaf = 0x40000001;
constexpr std::uint32_t kHypervisorBit = 1u << 31;  // leaf 1 ECX
constexpr std::uint32_t kHttBit = 1u << 28;         // leaf 1 EDX
}  // namespace

std::vector<kvm_cpuid_entry2> linux_guest_cpuid(std::vector<kvm_cpuid_entry2> entries, unsigned apic_id,
                                                unsigned vcpus, const LinuxCpuidOptions& options) {
  // Bits of the APIC ID that number the cores: a flat package of `vcpus`
  // cores, one thread each.
  const unsigned core_bits = vcpus <= 1 ? 0 : static_cast<unsigned>(std::bit_width(vcpus - 1));
  bool have_signature = false, have_features = false;
  for (auto& e : entries) {
    switch (e.function) {
      case 1:
        e.ebx = (e.ebx & 0x0000FFFF) | (apic_id << 24) | ((vcpus & 0xFF) << 16);
        e.ecx |= kHypervisorBit;
        if (vcpus > 1) e.edx |= kHttBit;
        break;
      case 0xB:
      case 0x1F:
        // Level 0: SMT (one thread per core); level 1: cores; then invalid.
        if (e.index == 0) {
          e.eax = 0, e.ebx = 1, e.ecx = (1u << 8) | 0;
        } else if (e.index == 1) {
          e.eax = core_bits, e.ebx = vcpus, e.ecx = (2u << 8) | 1;
        } else {
          e.eax = 0, e.ebx = 0, e.ecx = e.index;
        }
        e.edx = apic_id;
        break;
      case kKvmSignatureLeaf:
        have_signature = true;
        break;
      case kKvmFeaturesLeaf: {
        have_features = true;
        std::uint32_t features = e.eax;
        const auto set = [&features](std::uint32_t bit, bool on) { features = on ? features | bit : features & ~bit; };
        set(kKvmFeaturePvUnhalt, options.lock != GuestLockPolicy::kTas);
        set(kKvmFeatureStealTime, options.steal_time);
        set(kKvmFeaturePvSchedYield, options.pv_sched_yield);
        set(kKvmFeatureClocksource | kKvmFeatureClocksource2 | kKvmFeatureClocksourceStable, options.kvmclock);
        e.eax = features;
        e.edx = options.lock == GuestLockPolicy::kNative ? (e.edx | kKvmHintsRealtime) : (e.edx & ~kKvmHintsRealtime);
        break;
      }
      default:
        break;
    }
  }
  // Every KVM offers these leaves; without them the kernel would not know
  // it runs on KVM and no policy below applies.
  if (!have_signature || !have_features) {
    std::erase_if(entries, [](const kvm_cpuid_entry2& e) { return e.function == kKvmSignatureLeaf || e.function == kKvmFeaturesLeaf; });
    kvm_cpuid_entry2 signature{};
    signature.function = kKvmSignatureLeaf;
    signature.eax = kKvmFeaturesLeaf;
    signature.ebx = 0x4b4d564b;  // "KVMKVMKVM\0\0\0"
    signature.ecx = 0x564b4d56;
    signature.edx = 0x0000004d;
    entries.push_back(signature);
    kvm_cpuid_entry2 features{};
    features.function = kKvmFeaturesLeaf;
    std::uint32_t bits = 0;
    if (options.lock != GuestLockPolicy::kTas) bits |= kKvmFeaturePvUnhalt;
    if (options.steal_time) bits |= kKvmFeatureStealTime;
    if (options.pv_sched_yield) bits |= kKvmFeaturePvSchedYield;
    if (options.kvmclock) bits |= kKvmFeatureClocksource | kKvmFeatureClocksource2 | kKvmFeatureClocksourceStable;
    features.eax = bits;
    features.edx = options.lock == GuestLockPolicy::kNative ? kKvmHintsRealtime : 0;
    entries.push_back(features);
  }
  return entries;
}

}  // namespace lockvisor::machine
