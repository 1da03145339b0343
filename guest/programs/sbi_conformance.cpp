// SBI PVLOCK over the SBI doorbell: probe, kick, errors and sticky kicks,
// for all three extension IDs. Arg `pvlock=1|0` says what the VMM was told.
#include "programs/programs.h"
#include "runtime/boot.h"
#include "runtime/check.h"
#include "runtime/cpu.h"
#include "runtime/pv.h"
#include "runtime/shared.h"

namespace guest {
namespace {

constexpr u64 kNoSuchHart = 99;
constexpr u32 kUnknownFid = 7;
Shared<u32> g_step;

}  // namespace

void program_sbi_pvlock() {
  const bool on = arg_u64("pvlock", 1) != 0;
  const u32 eids[] = {kSbiExtPvlock, kSbiExtPvlockLegacy, boot().sbi_experimental_eid};
  if (this_cpu() == 0) {
    {
      Case c("probe");
      for (u32 eid : eids) {
        const SbiRet probe = sbi_probe(eid);
        LV_CHECK_EQ(probe.error, kSbiSuccess);
        LV_CHECK_EQ(probe.value, on ? 1 : 0);
      }
      LV_CHECK_EQ(sbi_probe(0x0DEAD).value, 0);
    }
    if (!on) {
      Case c("off");
      for (u32 eid : eids) LV_CHECK_EQ(sbi_kick(eid, apic_id_of(1)).error, kSbiErrNotSupported);
      g_step.store(100);  // release vCPU 1 without a kick
      return;
    }
    u32 step = 0;
    for (u32 eid : eids) {
      Case c("kick-wakes");
      wait_until_halted(apic_id_of(1));
      g_step.store(++step);
      LV_CHECK_EQ(sbi_kick(eid, apic_id_of(1)).error, kSbiSuccess);
      g_step.wait_for(step + 50);  // vCPU 1 acknowledges
      LV_CHECK_EQ(sbi_kick(eid, kNoSuchHart).error, kSbiErrInvalidParam);
      LV_CHECK_EQ(sbi_call(eid, kUnknownFid, apic_id_of(1)).error, kSbiErrNotSupported);
    }
    {
      Case c("sticky");
      LV_CHECK_EQ(sbi_kick(eids[0], apic_id_of(1)).error, kSbiSuccess);  // before its halt
      g_step.store(90);
      g_step.wait_for(91);
      wait_until_halted(apic_id_of(1));  // its second halt blocks: the kick was consumed
      g_step.store(92);
      LV_CHECK_EQ(sbi_kick(eids[2], apic_id_of(1)).error, kSbiSuccess);
    }
  } else if (this_cpu() == 1) {
    if (!on) {
      g_step.wait_for(100);
      return;
    }
    for (u32 step = 1; step <= 3; ++step) {
      while (g_step.load() != step) halt();
      g_step.store(step + 50);
    }
    g_step.wait_for(90);
    halt();  // returns at once: kicked before
    g_step.store(91);
    halt();
    LV_CHECK_EQ(g_step.load(), 92u);
  }
}

}  // namespace guest
