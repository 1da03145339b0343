// guest_main: the first CPL3 code of every vCPU (called from arch/x86/entry.S).
#include "lockvisor/abi/boot_info.h"
#include "lockvisor/abi/kvm_hypercall.h"
#include "lockvisor/abi/pv_wake.h"
#include "lockvisor/abi/vcpu_runstate.h"
#include "runtime/boot.h"
#include "runtime/check.h"
#include "runtime/cpu.h"
#include "runtime/cpuid_snapshot.h"
#include "runtime/program.h"
#include "runtime/pv.h"
#include "runtime/ucall_report.h"

namespace {
using namespace lockvisor::abi;
// arch/x86/entry.S reads the flags at this offset (BOOT_FLAGS_OFF).
static_assert(__builtin_offsetof(BootInfo, flags) == 20);
static_assert(kBootFlagGuestRing0 == 0x40);  // entry.S BOOT_FLAG_RING0
static_assert(kBootFlagX2apic == 0x800);     // entry.S BOOT_FLAG_X2APIC
static_assert(kIdtAddr == 0x18000);          // entry.S IDT_BASE

// CS as loaded: its low two bits are the current privilege level.
u64 read_cs() {
  u64 cs;
  asm volatile("mov %%cs, %0" : "=r"(cs));
  return cs;
}

// What the VMM put in BootInfo must agree with what CPUID said at CPL0: a
// mismatch means the VMM's two channels disagree, and every PV decision the
// guest makes would rest on one of them being wrong.
void check_cpuid_matches_boot_info(const BootInfo& info, unsigned index) {
  LV_CHECK_MSG(guest::kvm_signature_present(), "CPUID 0x40000000 (read at CPL0) lacks the KVM signature");
  LV_CHECK_EQ(guest::pv_unhalt_advertised(), (info.flags & kBootFlagPvUnhalt) != 0);
  LV_CHECK_EQ(guest::realtime_hint(), (info.flags & kBootFlagDedicated) != 0);
  // CPUID.1 holds the APIC id's low byte; past kMaxXapicVcpus vCPUs the
  // whole id is CPUID leaf 0xB's (the VMM checked that KVM has the leaf).
  const guest::Cpl0Cpuid& cpuid = guest::cpl0_cpuid();
  LV_CHECK_EQ(cpuid.basic.ebx >> 24, info.vcpus[index].apic_id & 0xFF);
  if (info.vcpu_count > kMaxXapicVcpus) LV_CHECK_EQ(cpuid.topology.edx, info.vcpus[index].apic_id);
  // The entry code switched the LAPIC to x2APIC mode only where CPUID offers it.
  if ((info.flags & kBootFlagX2apic) != 0)
    LV_CHECK_MSG((cpuid.basic.ecx & kCpuid1EcxX2apic) != 0, "more than 255 vCPUs need x2APIC, which CPUID does not offer");
}
}  // namespace

extern "C" [[noreturn]] void guest_main(const BootInfo* info, unsigned index, const guest::Cpl0Cpuid* cpuid) {
  // Nothing in BootInfo is trusted before magic and version match.
  if (info->magic != kBootInfoMagic || info->version != kBootInfoVersion)
    guest::assert_fail(__FILE__, __LINE__, "BootInfo magic/version mismatch: VMM and guest image disagree");
  guest::set_boot(info);
  LV_CHECK_EQ(guest::this_cpu(), index);  // the RSP-derived index must match the VMM's
  LV_CHECK_LT(index, info->vcpu_count);
  // Version 2: the run-state page is always mapped, at the fixed address.
  LV_CHECK_EQ(info->runstate_gpa, kRunStateGpa);
  LV_CHECK_LE(info->runstate_vcpus, kRunStateMaxVcpus);
  // Version 5: the virtual NUMA topology names existing nodes only.
  LV_CHECK(info->numa_nodes >= 1 && info->numa_nodes <= kMaxVnumaNodes);
  for (u32 i = 0; i < info->vcpu_count; ++i) LV_CHECK_LT(info->vcpu_node[i], info->numa_nodes);
  guest::set_cpl0_cpuid(index, *cpuid);
  check_cpuid_matches_boot_info(*info, index);
  // IOPL 0 at CPL3 on every KVM: the TSS I/O bitmap alone grants the
  // doorbells, as PVM requires (lockvisor/abi/doorbell.h).
  LV_CHECK_EQ(guest::read_rflags() & kRflagsIoplMask, 0u);
  // The program runs in the ring the VMM asked for (--guest-ring).
  LV_CHECK_EQ(read_cs() & 3, (info->flags & kBootFlagGuestRing0) != 0 ? 0u : 3u);
  const guest::Program* program = guest::find_program(info->program);
  if (program == nullptr)
    guest::assert_fail(__FILE__, __LINE__, guest::Text().str("unknown guest program '").str(info->program).str("'").c_str());
  program->run();
  guest::done(0);
}
