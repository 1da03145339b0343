// guest_main: the first CPL3 code of every vCPU (called from arch/x86/entry.S).
#include "lockvisor/abi/boot_info.h"
#include "runtime/boot.h"
#include "runtime/boot.h"
#include "runtime/check.h"
#include "runtime/cpu.h"
#include "runtime/program.h"
#include "runtime/report.h"

extern "C" [[noreturn]] void guest_main(const lockvisor::abi::BootInfo* info, unsigned index) {
  using namespace lockvisor::abi;
  // Nothing in BootInfo is trusted before magic and version match.
  if (info->magic != kBootInfoMagic || info->version != kBootInfoVersion)
    guest::assert_fail(__FILE__, __LINE__, "BootInfo magic/version mismatch: VMM and guest image disagree");
  guest::set_boot(info);
  LV_CHECK_EQ(guest::this_cpu(), index);  // the RSP-derived index must match the VMM's
  const guest::Program* program = guest::find_program(info->program);
  if (program == nullptr)
    guest::assert_fail(__FILE__, __LINE__, guest::Text().str("unknown guest program '").str(info->program).str("'").c_str());
  program->run();
  guest::done(0);
}
