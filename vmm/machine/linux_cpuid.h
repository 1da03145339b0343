// The CPUID a Linux guest sees, and the kernel spinlock policy it selects.
//
// A distribution kernel picks its spinlock at boot from what CPUID tells it
// (arch/x86/kernel/kvm.c, kvm_spinlock_init, and native_pv_lock_init, Linux
// 6.1): with KVM_FEATURE_PV_UNHALT, more than one CPU, no KVM_HINTS_REALTIME
// and no "nopvspin" it uses the paravirtual qspinlock (waiters halt, the
// unlocker kicks them with KVM_HC_KICK_CPU); without PV_UNHALT but with the
// "running on a hypervisor" bit it turns every qspinlock into a
// test-and-set lock (virt_spin_lock); with the realtime hint (or one CPU, or
// nopvspin) it keeps the native queued spinlock. So the policy is an
// experiment axis set entirely through CPUID: KVM's supported table with the
// KVM leaves toggled. What the kernel really chose is read from its log
// (linux_spinlock.h), never assumed from what was asked for.
#pragma once
#include <linux/kvm.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace lockvisor::machine {

enum class GuestLockPolicy { kPv, kTas, kNative };
std::string_view guest_lock_name(GuestLockPolicy policy);
std::optional<GuestLockPolicy> parse_guest_lock(std::string_view name);

struct LinuxCpuidOptions {
  GuestLockPolicy lock = GuestLockPolicy::kPv;
  bool steal_time = true;      // KVM_FEATURE_STEAL_TIME
  bool pv_sched_yield = true;  // KVM_FEATURE_PV_SCHED_YIELD (directed yield on IPI targets)
  bool kvmclock = true;        // KVM_FEATURE_CLOCKSOURCE and CLOCKSOURCE2
};

// KVM leaf bits (Documentation/virt/kvm/x86/cpuid.rst).
inline constexpr std::uint32_t kKvmFeatureClocksource = 1u << 0;
inline constexpr std::uint32_t kKvmFeatureClocksource2 = 1u << 3;
inline constexpr std::uint32_t kKvmFeatureStealTime = 1u << 5;
inline constexpr std::uint32_t kKvmFeaturePvUnhalt = 1u << 7;
inline constexpr std::uint32_t kKvmFeaturePvSchedYield = 1u << 13;
inline constexpr std::uint32_t kKvmFeatureClocksourceStable = 1u << 24;
inline constexpr std::uint32_t kKvmHintsRealtime = 1u << 0;

// `supported` is KVM_GET_SUPPORTED_CPUID. Sets this vCPU's APIC ID (leaf 1
// EBX[31:24], leaves 0xB/0x1F EDX) and a flat topology of `vcpus` cores in
// one package, the hypervisor bit, and the KVM leaves as the options say.
std::vector<kvm_cpuid_entry2> linux_guest_cpuid(std::vector<kvm_cpuid_entry2> supported, unsigned apic_id,
                                                unsigned vcpus, const LinuxCpuidOptions& options);

}  // namespace lockvisor::machine
