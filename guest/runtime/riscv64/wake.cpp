#include "runtime/riscv64/wake.h"

#include "runtime/format.h"
#include "runtime/riscv64/hart.h"
#include "runtime/riscv64/sbi.h"

namespace guest::riscv {

bool g_kick_via_pvlock;
u32 g_pvlock_eid;

void use_pvlock_kick(u32 eid) {
  g_kick_via_pvlock = true;
  g_pvlock_eid = eid;
}

SbiRet pvlock_kick(u32 eid, u64 hart) { return sbi_call(eid, kSbiPvlockKickCpu, hart); }

void wake_kick(unsigned hart) {
  const SbiRet r = g_kick_via_pvlock ? pvlock_kick(g_pvlock_eid, hart) : send_ipi(hart);
  if (r.error != kSbiSuccess)
    fail(Text().str(g_kick_via_pvlock ? "SBI PVLOCK KICK_CPU to hart " : "SBI IPI to hart ").u(hart).str(" failed: error ").i(r.error).c_str());
}

}  // namespace guest::riscv
