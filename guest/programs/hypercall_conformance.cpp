// Guest halves of the KICK_CPU / halt conformance cases. The VMM half (what
// each case expects from the VMM's counters) is vmm/conformance/cases.cpp.
// vCPU 0 is the halter, vCPU 1 the kicker, unless a case says otherwise.
#include "programs/halt_kind.h"
#include "programs/programs.h"
#include "runtime/boot.h"
#include "runtime/check.h"
#include "runtime/cpu.h"
#include "runtime/shared.h"
#include "runtime/string.h"

namespace guest {
namespace {

constexpr u32 kNoSuchApicId = 99;
constexpr u64 kUnknownHypercall = 77;
constexpr u64 kStillHaltedCheckNs = 5'000'000;  // how long "nobody woke it" is watched

// "Nobody woke it": after watching kStillHaltedCheckNs, the vCPU is halted,
// still or again. The VMM may take a halted vCPU out of KVM_RUN for a moment
// (its run-state registration once the page is published, a park, a stop
// check) and re-enter it halted, so one query can land in between. A vCPU
// really woken runs on and fails its own check after its halt, which every
// caller's target has.
void expect_still_halted(u32 apic_id) {
  spin_ns(kStillHaltedCheckNs);
  wait_until_halted(apic_id);
}

Shared<u32> g_phase;
Shared<u64> g_kick_tsc;
u64 g_latency_cycles[4096];
u64 g_halt_cycles[4096];

}  // namespace

// A kick wakes a halted vCPU; reports per round the kick->wake latency (TSC
// cycles, the kicker's TSC to the halter's) and how long the halter was
// halted (its own TSC before and after). The kick comes only after the halt
// began, so a delay the VMM adds to every kick is a lower bound of the
// second figure on any host; the first one crosses two vCPUs' TSCs, which
// the nested machine (its TSC marked unstable) does not keep in step.
void program_kick_wake() {
  const bool kernel = use_kernel_halt();
  const u64 rounds = arg_u64("rounds", 200);
  LV_CHECK_LE(rounds, sizeof g_latency_cycles / sizeof g_latency_cycles[0]);
  LV_CHECK(pv_unhalt_advertised());
  if (this_cpu() == 0) {
    for (u64 r = 0; r < rounds; ++r) {
      const u64 halting = rdtsc();
      halt_as_configured(kernel);
      const u64 woke = rdtsc();
      g_halt_cycles[r] = woke > halting ? woke - halting : 0;
      LV_CHECK_EQ(g_phase.load(), r + 1);  // only the round's kick may wake us
      // vCPUs' TSCs can be a little apart (seen in the nested machine, where
      // KVM's in-kernel wake-up beats the skew): never a wrapped negative.
      const u64 kicked = g_kick_tsc.load();
      g_latency_cycles[r] = woke > kicked ? woke - kicked : 0;
      g_phase.store(r + 1000000);          // ack
    }
    report_array("kick_wake_cycles", g_latency_cycles, rounds, ResultKind::kTscCycles);
    report_array("halt_cycles", g_halt_cycles, rounds, ResultKind::kTscCycles);
  } else if (this_cpu() == 1) {
    for (u64 r = 0; r < rounds; ++r) {
      wait_until_halted(apic_id_of(0));
      g_phase.store(r + 1);
      g_kick_tsc.store(rdtsc());
      LV_CHECK_EQ(kick_cpu(apic_id_of(0)), kKvmSuccess);
      g_phase.wait_for(r + 1000000);
    }
  }
}

// A kick before the halt is remembered (the halt returns at once) and is
// consumed: the following halt blocks until another kick.
void program_sticky_kick() {
  const bool kernel = use_kernel_halt();
  const u64 kicks = arg_u64("kicks", 1);  // several kicks before one halt wake it once
  if (this_cpu() == 0) {
    g_phase.wait_for(1);
    halt_as_configured(kernel);  // returns at once: the kick is latched
    g_phase.store(2);
    halt_as_configured(kernel);  // blocks until the kick of phase 3
    LV_CHECK_EQ(g_phase.load(), 3u);
  } else if (this_cpu() == 1) {
    for (u64 k = 0; k < kicks; ++k) LV_CHECK_EQ(kick_cpu(apic_id_of(0)), kKvmSuccess);
    g_phase.store(1);
    g_phase.wait_for(2);
    wait_until_halted(apic_id_of(0));
    expect_still_halted(apic_id_of(0));  // the consumed kick did not leave it awake
    g_phase.store(3);
    LV_CHECK_EQ(kick_cpu(apic_id_of(0)), kKvmSuccess);
  }
}

// HALT_FOR, the doorbell's halt with a limit: with no kick it ends by its
// limit and says so, no sooner (timed on the halter's own TSC); a kick sent
// before it is kept and consumed as for HALT; a kick while it sleeps ends
// it. The last halt is retried if it reaches its limit (1 s) before the
// kicker's kick, which the host scheduler decides: "rehalts" counts them.
void program_halt_for() {
  constexpr u64 kLimitNs = 2'000'000;
  if (this_cpu() == 0) {
    const u64 t0 = rdtsc();
    LV_CHECK_EQ(halt_for(kLimitNs), kHaltForExpired);
    report_result("expired_halt_cycles", rdtsc() - t0, ResultKind::kTscCycles);
    g_phase.store(1);
    g_phase.wait_for(2);
    LV_CHECK_EQ(halt_for(kLimitNs), kKvmSuccess);  // the kick of phase 1, kept
    g_phase.store(3);
    u64 rehalts = 0;
    while (halt_for(kHaltForMaxNs) == kHaltForExpired) ++rehalts;
    report_result("rehalts", rehalts);
  } else if (this_cpu() == 1) {
    g_phase.wait_for(1);
    LV_CHECK_EQ(kick_cpu(apic_id_of(0)), kKvmSuccess);
    g_phase.store(2);
    g_phase.wait_for(3);
    wait_until_halted(apic_id_of(0));
    LV_CHECK_EQ(kick_cpu(apic_id_of(0)), kKvmSuccess);
  }
}

// Kick to self, kick to an APIC ID nobody has, flags != 0, unknown numbers.
void program_kick_targets() {
  if (this_cpu() == 0) {
    {
      Case c("kick-self");
      LV_CHECK_EQ(kick_cpu(apic_id_of(0)), kKvmSuccess);
      halt();  // latched by our own kick: returns at once
    }
    {
      Case c("flags-ignored");
      LV_CHECK_EQ(kick_cpu(apic_id_of(0), /*flags=*/1), kKvmSuccess);  // KVM ignores a0
      halt();
    }
    {
      Case c("unknown-number");
      LV_CHECK_EQ(kvm_hypercall(kUnknownHypercall), kKvmEnosys);
      LV_CHECK_EQ(query_halted(kNoSuchApicId), kKvmEinval);
    }
    {
      Case c("kick-nonexistent-apic-id");
      wait_until_halted(apic_id_of(1));
      LV_CHECK_EQ(kick_cpu(kNoSuchApicId), kKvmSuccess);  // KVM: 0, and nobody wakes
      expect_still_halted(apic_id_of(1));
      g_phase.store(1);
      LV_CHECK_EQ(kick_cpu(apic_id_of(1)), kKvmSuccess);
    }
  } else if (this_cpu() == 1) {
    halt();
    LV_CHECK_EQ(g_phase.load(), 1u);
  }
}

// PV off: the VMM hides PV_UNHALT and refuses KICK_CPU with -KVM_ENOSYS. The
// kicked vCPU must stay halted: the run ends in the deadlock report, which
// is exactly what the case expects.
//
// enforce=0 (--enforce-pv-cpuid off): KVM without
// KVM_CAP_ENFORCE_PV_FEATURE_CPUID performs the kick anyway and returns 0;
// the VMM matches it, and the run completes.
void program_pv_off() {
  const bool enforced = arg_u64("enforce", 1) != 0;
  LV_CHECK(!pv_unhalt_advertised());
  LV_CHECK(kvm_signature_present());
  if (this_cpu() == 0) {
    LV_CHECK_EQ(kvm_hypercall(kUnknownHypercall), kKvmEnosys);
    wait_until_halted(apic_id_of(1));
    if (!enforced) {
      g_phase.store(1);
      LV_CHECK_EQ(kick_cpu(apic_id_of(1)), kKvmSuccess);
      report_result("kick_refused", 0);
      return;
    }
    LV_CHECK_EQ(kick_cpu(apic_id_of(1)), kKvmEnosys);
    expect_still_halted(apic_id_of(1));
    report_result("kick_refused", 1);
  } else if (this_cpu() == 1) {
    halt();
    if (enforced) assert_fail(__FILE__, __LINE__, "woken although PV is off");
    LV_CHECK_EQ(g_phase.load(), 1u);
  }
}

// The missed-wakeup race made deterministic: vCPU 0 kicks vCPU 1 while it is
// still running, then vCPU 1 halts waiting for that kick. Sticky: the halt
// returns and both finish. Lossy: the kick was dropped, both end up halted,
// and the VMM's deadlock detector must say so.
//
// via=sbi: the same with SBI PVLOCK kicks, whose semantics --sbi-kick picks:
// sticky (the halt returns) or proposed (the RISC-V host patch: the early
// kick is lost, the deadlock detector reports it).
void program_lost_wakeup() {
  char via[8] = "kvm";
  arg_str("via", via, sizeof via);
  const bool sbi = str_equal(via, "sbi");
  const auto kick = [sbi](u32 cpu) {
    if (sbi)
      LV_CHECK_EQ(sbi_kick(kSbiExtPvlock, apic_id_of(cpu)).error, kSbiSuccess);
    else
      LV_CHECK_EQ(kick_cpu(apic_id_of(cpu)), kKvmSuccess);
  };
  if (this_cpu() == 0) {
    g_phase.wait_for(1);                      // vCPU 1 is running, not halted
    kick(1);
    g_phase.store(2);
    while (g_phase.load() != 3) halt();       // wait for the answer
  } else if (this_cpu() == 1) {
    g_phase.store(1);
    g_phase.wait_for(2);
    halt();                                   // the kick came before this halt
    g_phase.store(3);
    kick(0);
  }
}

}  // namespace guest
