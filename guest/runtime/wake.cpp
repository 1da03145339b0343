// --pv-wake's guest half (runtime/wake.h). The handlers below run in
// interrupt context at CPL0 and are built with general registers only
// (guest/CMakeLists.txt): they may interrupt code that holds live SSE state.
#include "runtime/wake.h"

#include "runtime/boot.h"
#include "runtime/check.h"
#include "runtime/cpu.h"
#include "runtime/cpuid_snapshot.h"
#include "runtime/pv.h"

extern "C" {
unsigned long cpl0_wake_wait_ipi(volatile lockvisor::abi::u8* ptr, lockvisor::abi::u8 val,
                                 volatile lockvisor::abi::u8* waiting);
unsigned long cpl0_wake_wait_nmi(volatile lockvisor::abi::u8* ptr, lockvisor::abi::u8 val,
                                 volatile lockvisor::abi::u8* waiting, volatile lockvisor::abi::u8* pending);
void cpl0_x2apic_icr(lockvisor::abi::u32 destination, lockvisor::abi::u32 low);
extern const char nmi_wait_window[], nmi_wait_after_hlt[], nmi_wait_skip[];
void wake_ipi_handler(lockvisor::abi::u64* frame);
void wake_nmi_handler(lockvisor::abi::u64* frame);
}

namespace guest {
namespace {

static_assert(kBootFlagWakeIpi == 0x200 && kBootFlagWakeNmi == 0x400, "arch/x86/entry.S BOOT_FLAG_WAKE_*");
static_assert(kWakeVector == 0xF2, "arch/x86/entry.S VECTOR_WAKE");
static_assert(kMsrApicBase == 0x1B && kMsrX2apicEoi == 0x80B && kMsrX2apicIcr == 0x830, "arch/x86/entry.S MSR_*");
static_assert((kApicBaseEnable | kApicBaseX2apic) == 0xC00, "arch/x86/entry.S APIC_BASE_EN_X2APIC");

// One handler's counts on one CPU.
struct HandlerCounts {
  u64 interrupts, woken, spurious, halts_skipped, cycles, max_cycles;
};

// Per vCPU, a cache line of its own. Why an NMI inside the IPI handler (or
// an IPI never inside the NMI handler: its gate clears IF) cannot corrupt
// anything: each handler writes only its own HandlerCounts and its own wait
// flags, only on its own CPU, and the waiting code writes the flags only
// with the handler's interrupt held back (IF=0 for the IPI) or at points the
// NMI handler's window test tells apart (entry.S). A count is one
// read-modify-write that no other code on the CPU writes, so even a handler
// interrupted mid-update by the other finds its own field as it left it.
// NMIs do not nest (the CPU holds the next one back until the handler's
// iretq), and the IPI gate clears IF, so neither handler re-enters itself.
struct alignas(64) WakeCpu {
  volatile u8 ipi_waiting;  // in cpl0_wake_wait_ipi, between the mark and the wake
  volatile u8 nmi_waiting;  // in cpl0_wake_wait_nmi, likewise
  volatile u8 nmi_pending;  // an NMI that found no wait: the next wait returns at once
  HandlerCounts ipi;
  HandlerCounts nmi;
};
WakeCpu g_wake[kMaxVcpus];

void account(HandlerCounts& c, u64 start) {
  const u64 cycles = rdtsc() - start;
  c.cycles += cycles;
  if (cycles > c.max_cycles) c.max_cycles = cycles;
}

}  // namespace

PvWake pv_wake() { return pv_wake_of_boot_flags(boot().flags); }

void init_pv_wake() {
  if (pv_wake() == PvWake::kHypercall) return;
  LV_CHECK_MSG(at_cpl0(), "--pv-wake ipi|nmi needs --guest-ring 0");
  LV_CHECK_MSG(kvm_pv_path(), "--pv-wake ipi|nmi needs the in-kernel LAPIC (--backend kvm)");
  LV_CHECK_MSG((cpl0_cpuid().basic.ecx & kCpuid1EcxX2apic) != 0, "--pv-wake ipi|nmi: CPUID offers no x2APIC");
}

bool pv_wake_wait(volatile u8* ptr, u8 val) {
  WakeCpu& w = g_wake[this_cpu()];
  switch (pv_wake()) {
    case PvWake::kIpi: return cpl0_wake_wait_ipi(ptr, val, &w.ipi_waiting) != 0;
    case PvWake::kNmi: return cpl0_wake_wait_nmi(ptr, val, &w.nmi_waiting, &w.nmi_pending) != 0;
    case PvWake::kHypercall: break;
  }
  // KVM's pv_unhalted keeps a kick sent after the caller's check: no
  // re-check needed (or possible: the kick is not visible to the guest).
  halt();
  return true;
}

bool pv_wake_bounded() { return pv_wake() == PvWake::kHypercall && !kvm_pv_path(); }

bool pv_wake_halt_for(u64 ns) {
  LV_CHECK(pv_wake_bounded());
  // As pv_wake_wait(): the doorbell's latch keeps a kick sent after the
  // caller's check.
  return halt_for(ns) == kHaltForExpired;
}

void pv_wake_kick(u32 apic_id) {
  switch (pv_wake()) {
    case PvWake::kIpi: cpl0_x2apic_icr(apic_id, kIcrFixedWake); return;
    case PvWake::kNmi: cpl0_x2apic_icr(apic_id, kIcrNmi); return;
    case PvWake::kHypercall: break;
  }
  kick_cpu(apic_id);
}

PvWakeCounts pv_wake_counts(u32 cpu) {
  const WakeCpu& w = g_wake[cpu];
  const HandlerCounts& c = pv_wake() == PvWake::kNmi ? w.nmi : w.ipi;
  return {c.interrupts, c.woken, c.spurious, c.halts_skipped, c.cycles, c.max_cycles};
}

}  // namespace guest

using guest::g_wake;

// frame[0] is the interrupted RIP. The IPI can only be taken in the `sti;
// hlt` of cpl0_wake_wait_ipi (the program runs with IF=0 everywhere else) or
// right after that halt's handler returned, before the `cli`: the waiting
// flag tells the two apart.
extern "C" void wake_ipi_handler(lockvisor::abi::u64*) {
  const lockvisor::abi::u64 start = guest::rdtsc();
  guest::WakeCpu& w = g_wake[guest::this_cpu()];
  ++w.ipi.interrupts;
  if (w.ipi_waiting != 0) {
    w.ipi_waiting = 0;
    ++w.ipi.woken;
  } else {
    ++w.ipi.spurious;
  }
  guest::account(w.ipi, start);
}

// In the wait's window (entry.S) with the CPU waiting: a wake-up; before the
// `hlt` the saved RIP moves past it. Anywhere else: spurious, and pending so
// that the next wait does not halt (an NMI is not kept by the hardware).
extern "C" void wake_nmi_handler(lockvisor::abi::u64* frame) {
  const lockvisor::abi::u64 start = guest::rdtsc();
  guest::WakeCpu& w = g_wake[guest::this_cpu()];
  ++w.nmi.interrupts;
  const auto rip = frame[0];
  const auto window = reinterpret_cast<lockvisor::abi::u64>(nmi_wait_window);
  const auto after_hlt = reinterpret_cast<lockvisor::abi::u64>(nmi_wait_after_hlt);
  if (w.nmi_waiting != 0 && rip >= window && rip <= after_hlt) {
    w.nmi_waiting = 0;
    ++w.nmi.woken;
    if (rip != after_hlt) {
      frame[0] = reinterpret_cast<lockvisor::abi::u64>(nmi_wait_skip);
      ++w.nmi.halts_skipped;
    }
  } else {
    w.nmi_pending = 1;
    ++w.nmi.spurious;
  }
  guest::account(w.nmi, start);
}
