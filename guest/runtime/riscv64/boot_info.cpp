#include "runtime/riscv64/boot_info.h"

#include "lockvisor/abi/riscv_boot.h"
#include "runtime/boot.h"
#include "runtime/riscv64/hart.h"
#include "runtime/string.h"

namespace guest::riscv {
namespace {
const BootInfo* g_boot_info;  // written by the boot hart before it starts the others
}  // namespace

const char* check_boot_info(u64 address, u32 fdt_harts) {
  // The address first: a misaligned one or one outside RAM would fault
  // before the magic could be read.
  if (address % alignof(BootInfo) != 0 || address < kRiscvRamBase)
    return "BootInfo's address (/chosen/lockvisor,boot-info) is misaligned or below RAM";
  const BootInfo& info = *reinterpret_cast<const BootInfo*>(address);
  if (info.magic != kBootInfoMagic) return "BootInfo has the wrong magic: it is not a BootInfo";
  if (info.version != kBootInfoVersion || info.size != sizeof(BootInfo))
    return "BootInfo's version or size is not this image's: VMM and guest image disagree";
  if (info.vcpu_count == 0 || info.vcpu_count > fdt_harts || info.vcpu_count > kRiscvMaxHarts)
    return "BootInfo's vcpu_count is 0 or more than the harts the device tree describes";
  if (str_length(info.program, kProgramNameBytes) == kProgramNameBytes) return "BootInfo's program name is not terminated";
  return nullptr;
}

const BootInfo* boot_info() { return g_boot_info; }
void set_boot_info(const BootInfo* info) { g_boot_info = info; }

}  // namespace guest::riscv

// What runtime/boot.h gives the architecture-neutral guest code both images
// compile (runtime/boot_args.cpp, runtime/lock_tuning.cpp): the BootInfo
// (lockvisor mode only), and the lock clock's rate, which on RV64 is the
// device tree's timebase, not BootInfo's tsc_khz.
const lockvisor::abi::BootInfo& guest::boot() { return *riscv::g_boot_info; }
lockvisor::abi::u64 guest::tsc_khz() { return riscv::lock_clock_khz(); }
