#include "runtime/riscv64/lockvisor_sbi.h"

#include "locks/atomic.h"

namespace guest::riscv {
namespace {
bool g_lockvisor_sbi;  // written by the boot hart before it starts the others
}  // namespace

void detect_lockvisor_sbi() { g_lockvisor_sbi = sbi_probe(kSbiExtLockvisor); }
bool lockvisor_sbi() { return g_lockvisor_sbi; }

void lv_putchar(char c) { sbi_call(kSbiExtLockvisor, kLvSbiPutchar, static_cast<u8>(c)); }

void lv_ucall(const Ucall* ucall) { sbi_call(kSbiExtLockvisor, kLvSbiUcall, reinterpret_cast<u64>(ucall)); }

void lv_kick_ack() { sbi_call(kSbiExtLockvisor, kLvSbiKickAck); }

SbiRet lv_query_halted(unsigned hart) { return sbi_call(kSbiExtLockvisor, kLvSbiQueryHalted, hart); }

void lv_trap(u64 scause, u64 sepc, u64 stval) {
  sbi_call(kSbiExtLockvisor, kLvSbiTrap, scause, sepc, stval);
  // The VMM never resumes a hart after kLvSbiTrap. No WFI here: under
  // lockvisor the only WFI the image executes is the PV wait's.
  for (;;) lockvisor::locks::cpu_relax();
}

}  // namespace guest::riscv
