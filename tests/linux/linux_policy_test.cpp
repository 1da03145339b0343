// The kernel spinlock policy as an experiment axis: the CPUID a Linux guest
// gets for each --guest-lock value, and how the kernel's own log line is
// read back (no KVM needed).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "vmm/linuxinit/kernel_spinlock.h"
#include "vmm/machine/linux_cpuid.h"

namespace lockvisor::machine {
namespace {

std::vector<kvm_cpuid_entry2> supported() {
  std::vector<kvm_cpuid_entry2> entries(4);
  entries[0].function = 1;
  entries[0].ebx = 0xAB000800;  // a stale APIC ID and CLFLUSH size
  entries[1].function = 0xB;
  entries[1].index = 1;
  entries[2].function = 0x40000000;
  entries[2].eax = 0x40000001;
  entries[3].function = 0x40000001;
  // What KVM offers (a 6.1 kernel): clocksources, steal time, PV_UNHALT,
  // PV_SCHED_YIELD and more.
  entries[3].eax = 0x01007efb | kKvmFeaturePvSchedYield;
  return entries;
}

const kvm_cpuid_entry2& leaf(const std::vector<kvm_cpuid_entry2>& e, std::uint32_t function, std::uint32_t index = 0) {
  for (const auto& x : e)
    if (x.function == function && x.index == index) return x;
  throw std::runtime_error("no such leaf");
}

TEST(LinuxCpuid, EachPolicySetsTheBitsTheKernelReads) {
  LinuxCpuidOptions o;
  o.lock = GuestLockPolicy::kPv;
  auto pv = linux_guest_cpuid(supported(), 3, 4, o);
  EXPECT_NE(leaf(pv, 0x40000001).eax & kKvmFeaturePvUnhalt, 0u);
  EXPECT_EQ(leaf(pv, 0x40000001).edx & kKvmHintsRealtime, 0u);
  EXPECT_NE(leaf(pv, 1).ecx & (1u << 31), 0u);

  o.lock = GuestLockPolicy::kTas;
  auto tas = linux_guest_cpuid(supported(), 3, 4, o);
  EXPECT_EQ(leaf(tas, 0x40000001).eax & kKvmFeaturePvUnhalt, 0u);
  EXPECT_NE(leaf(tas, 1).ecx & (1u << 31), 0u);  // virt_spin_lock needs the hypervisor bit

  o.lock = GuestLockPolicy::kNative;
  auto native = linux_guest_cpuid(supported(), 3, 4, o);
  EXPECT_NE(leaf(native, 0x40000001).edx & kKvmHintsRealtime, 0u);
}

TEST(LinuxCpuid, TogglesAndTopology) {
  LinuxCpuidOptions o;
  o.steal_time = false;
  o.pv_sched_yield = false;
  o.kvmclock = false;
  auto e = linux_guest_cpuid(supported(), 5, 6, o);
  const auto features = leaf(e, 0x40000001).eax;
  EXPECT_EQ(features & kKvmFeatureStealTime, 0u);
  EXPECT_EQ(features & kKvmFeaturePvSchedYield, 0u);
  EXPECT_EQ(features & (kKvmFeatureClocksource | kKvmFeatureClocksource2 | kKvmFeatureClocksourceStable), 0u);
  EXPECT_NE(features & kKvmFeaturePvUnhalt, 0u);
  EXPECT_EQ(leaf(e, 1).ebx >> 24, 5u);          // APIC ID
  EXPECT_EQ((leaf(e, 1).ebx >> 16) & 0xFF, 6u);  // logical processors
  EXPECT_EQ(leaf(e, 1).ebx & 0xFFFF, 0x0800u);   // the rest untouched
  EXPECT_EQ(leaf(e, 0xB, 1).ebx, 6u);
  EXPECT_EQ(leaf(e, 0xB, 1).eax, 3u);  // 6 cores need 3 APIC ID bits
  EXPECT_EQ(leaf(e, 0xB, 1).edx, 5u);
}

TEST(LinuxCpuid, KvmLeavesAreAddedWhenTheTableLacksThem) {
  std::vector<kvm_cpuid_entry2> bare(1);
  bare[0].function = 1;
  auto e = linux_guest_cpuid(bare, 0, 1, {});
  EXPECT_EQ(leaf(e, 0x40000000).ebx, 0x4b4d564bu);
  EXPECT_NE(leaf(e, 0x40000001).eax & kKvmFeaturePvUnhalt, 0u);
}

TEST(LinuxCpuid, PolicyNamesRoundTrip) {
  for (auto p : {GuestLockPolicy::kPv, GuestLockPolicy::kTas, GuestLockPolicy::kNative})
    EXPECT_EQ(parse_guest_lock(guest_lock_name(p)), p);
  EXPECT_FALSE(parse_guest_lock("qspinlock"));
}

TEST(KernelSpinlock, EachLogLineNamesItsPolicy) {
  using linuxboot::classify_kernel_spinlock;
  const auto one = [](std::string line, bool bit) {
    std::vector<std::string> lines{"[    0.000000] Linux version 6.1.0", std::move(line)};
    return classify_kernel_spinlock(lines, bit).policy;
  };
  EXPECT_EQ(one("[    0.021] kvm-guest: PV spinlocks enabled", true), "pv");
  EXPECT_EQ(one("kvm-guest: PV spinlocks disabled, no host support", true), "tas");
  EXPECT_EQ(one("kvm-guest: PV spinlocks disabled, no host support", false), "native");
  EXPECT_EQ(one("kvm-guest: PV spinlocks disabled with KVM_HINTS_REALTIME hints", true), "native");
  EXPECT_EQ(one("kvm-guest: PV spinlocks disabled, single CPU", true), "native");
  EXPECT_EQ(one("kvm-guest: PV spinlocks disabled, forced by \"nopvspin\" parameter", true), "native");
  std::vector<std::string> none{"nothing about locks"};
  const auto unknown = classify_kernel_spinlock(none, true);
  EXPECT_EQ(unknown.policy, "unknown");
  EXPECT_TRUE(unknown.line.empty());
}

}  // namespace
}  // namespace lockvisor::machine
