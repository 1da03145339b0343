// Boot and harts of the RV64 guest (the protocol: guest/arch/riscv64/entry.S
// and lockvisor/abi/riscv_boot.h).
#include "runtime/riscv64/hart.h"

#include "locks/atomic.h"
#include "runtime/program.h"
#include "runtime/riscv64/boot_info.h"
#include "runtime/riscv64/fdt.h"
#include "runtime/riscv64/lock_env.h"
#include "runtime/riscv64/lockvisor_sbi.h"
#include "runtime/riscv64/sbi.h"
#include "runtime/riscv64/wake.h"
#include "runtime/ucall_report.h"

namespace guest::riscv {
namespace {
using lockvisor::locks::Order;

// Each hart's stack: 16 KiB, where the deepest frame (a workload's loop with
// its per-run counters) is under 1 KiB and the lock code adds a few small ones.
constexpr u64 kHartStackBytes = 16 * 1024;
}  // namespace
}  // namespace guest::riscv

// What entry.S reads (by name, so its sizes are defined here only): the
// stacks, their size and how many there are. The `extern` declarations give
// the two constants external linkage.
extern "C" {
alignas(16) char rv_hart_stacks[lockvisor::abi::kRiscvMaxHarts][guest::riscv::kHartStackBytes];
extern const lockvisor::abi::u64 rv_hart_stack_bytes;
extern const lockvisor::abi::u64 rv_max_harts;
const lockvisor::abi::u64 rv_hart_stack_bytes = guest::riscv::kHartStackBytes;
const lockvisor::abi::u64 rv_max_harts = lockvisor::abi::kRiscvMaxHarts;
extern char _start[];
}

namespace guest::riscv {
namespace {

unsigned g_hart_count;
unsigned g_boot_hart;
u64 g_lock_clock_khz;
u32 g_console_busy;
u32 g_started;           // harts that reached rv_secondary_main
void (*g_hart_fn)();     // what they run, set before the first hart_start
const guest::Program* g_program;  // lockvisor mode: BootInfo::program

// _start as linked: an absolute address, stored in .data, that no loader
// relocates (the image is not position-independent:
// lockvisor/abi/riscv_boot.h). volatile: the compiler must read it, not fold
// it into the comparison with where _start really is.
char* const volatile g_linked_start = _start;

// Where _start really is: pc-relative.
u64 loaded_start() {
  u64 a;
  asm("lla %0, _start" : "=r"(a));
  return a;
}

const char* trap_name(u64 cause) {
  if (cause >> 63) return "interrupt";
  switch (cause) {
    case 0: return "instruction address misaligned";
    case 1: return "instruction access fault";
    case 2: return "illegal instruction";
    case 3: return "breakpoint";
    case 4: return "load address misaligned";
    case 5: return "load access fault";
    case 6: return "store/AMO address misaligned";
    case 7: return "store/AMO access fault";
    case 8: return "environment call from U-mode";
    case 9: return "environment call from S-mode";
    case 12: return "instruction page fault";
    case 13: return "load page fault";
    case 15: return "store/AMO page fault";
  }
  return "unknown cause";
}

// Harts are numbered 0..n-1 on every platform this guest boots on (QEMU's
// `virt`, KVM's vCPU ids): HSM answers "invalid parameter" past the last.
unsigned count_harts() {
  unsigned n = 0;
  while (n < kRiscvMaxHarts && hart_get_status(n).error == kSbiSuccess) n++;
  return n;
}

// Per-hart setup, on every hart before anything else: the kick's interrupt
// may end a WFI (wake.h).
void hart_init() { enable_wake_interrupt(); }

// Lockvisor mode: BootInfo::program on this hart, then DONE (the x86 guest's
// last message); the hart is never resumed, and never executes WFI.
[[noreturn]] void run_boot_info_program() {
  g_program->run();
  guest::done(0);
}

// Firmware mode (no BootInfo in the device tree): the image's own program on
// the boot hart, which starts the other harts itself.
[[noreturn]] void firmware_main() {
  hart_init();
  g_hart_count = count_harts();
  if (g_boot_hart >= g_hart_count) fail("the boot hart's id is beyond the harts HSM reports");
  print_banner();
  program_main();
  finish(true);
}

// Lockvisor mode: the BootInfo the device tree names, checked before it is
// trusted (a bad one is reported on the console and ends the run with SRST
// "system failure", as any failure before this point), then its program on
// vcpu_count harts.
[[noreturn]] void lockvisor_main(const FdtFacts& fdt) {
  if (!fdt.boot_info_valid) fail("/chosen/lockvisor,boot-info is not one u64");
  if (const char* why = check_boot_info(fdt.boot_info, fdt.harts)) fail(why);
  const BootInfo* info = reinterpret_cast<const BootInfo*>(fdt.boot_info);
  // lockvisor's VMM enters hart 0 first (riscv_boot.h), and the programs'
  // roles (hart 0 kicks, hart 1 waits; hart 0 reports the lock tuning) are
  // written for it. Firmware may pick another (OpenSBI draws lots).
  if (g_boot_hart != 0) fail(kRiscvBootHartMessage);
  // From here on failures are reported through the VMM's report channel.
  set_boot_info(info);
  use_pvlock_kick(info->sbi_experimental_eid);
  hart_init();
  g_hart_count = info->vcpu_count;
  print_banner();
  g_program = guest::find_program(info->program);
  if (g_program == nullptr)
    guest::assert_fail(__FILE__, __LINE__, Text().str("unknown guest program '").str(info->program).str("'").c_str());
  set_lock_env_features();
  start_other_harts(&run_boot_info_program);
  run_boot_info_program();
}

}  // namespace

unsigned hart_count() { return g_hart_count; }
unsigned boot_hart() { return g_boot_hart; }
u64 lock_clock_khz() { return g_lock_clock_khz; }

void print_line(const char* line) {
  while (lockvisor::locks::xchg(&g_console_busy, u32{1}, Order::acquire) != 0) lockvisor::locks::cpu_relax();
  console_write(line);
  console_putchar('\n');
  lockvisor::locks::store_release(&g_console_busy, u32{0});
}
void print_line(const Text& line) { print_line(line.c_str()); }

void print_banner() {
  print_line(Text()
                 .str("lockvisor rv64 guest: ")
                 .u(g_hart_count)
                 .str(" harts, boot hart ")
                 .u(g_boot_hart)
                 .str(", lock clock ")
                 .u(g_lock_clock_khz)
                 .str(" kHz"));
}

void finish(bool ok) {
  print_line(ok ? "PASS" : "FAIL");
  power_off(ok);
}

void fail(const char* what) {
  if (boot_info() != nullptr) guest::assert_fail(__FILE__, __LINE__, what);
  print_line(Text().str("FAIL: hart ").u(this_hart()).str(": ").str(what));
  finish(false);
}

void start_other_harts(void (*fn)()) {
  g_hart_fn = fn;
  unsigned others = 0;
  for (unsigned h = 0; h < g_hart_count; h++) {
    if (h == this_hart()) continue;
    const SbiRet r = hart_start(h, reinterpret_cast<u64>(_start), 0);
    if (r.error != kSbiSuccess) fail(Text().str("SBI HSM hart_start(").u(h).str(") failed: error ").i(r.error).c_str());
    others++;
  }
  while (lockvisor::locks::load_acquire(&g_started) != others) lockvisor::locks::cpu_relax();
}

}  // namespace guest::riscv

using namespace guest::riscv;

extern "C" [[noreturn]] void rv_boot_main(u64 hart, u64 dtb) {
  (void)hart;
  // Before the first console byte: the console's transport depends on it.
  detect_lockvisor_sbi();
  if (loaded_start() != reinterpret_cast<u64>(g_linked_start))
    fail(guest::Text()
             .str("the image was loaded at ")
             .hex(loaded_start())
             .str(", linked for ")
             .hex(reinterpret_cast<u64>(g_linked_start))
             .str(" (kRiscvImageBase)")
             .c_str());
  g_boot_hart = this_hart();
  const FdtFacts fdt = fdt_read(reinterpret_cast<const void*>(dtb));
  g_lock_clock_khz = fdt.timebase_hz / 1000;
  if (g_lock_clock_khz == 0) fail("the device tree in a1 has no /cpus/timebase-frequency (of 1 kHz or more)");
  if (fdt.has_boot_info) lockvisor_main(fdt);
  firmware_main();
}

extern "C" [[noreturn]] void rv_secondary_main(u64 hart, u64 opaque) {
  (void)hart;
  (void)opaque;
  hart_init();
  lockvisor::locks::fetch_add(&g_started, u32{1}, Order::release);
  g_hart_fn();
  for (;;) asm volatile("wfi");  // firmware mode only: lockvisor's programs end in DONE
}

extern "C" [[noreturn]] void rv_trap(u64 cause, u64 epc, u64 tval) {
  if (boot_info() != nullptr) lv_trap(cause, epc, tval);
  fail(guest::Text()
           .str("trap: ")
           .str(trap_name(cause))
           .str(" (scause ")
           .hex(cause)
           .str(") at sepc ")
           .hex(epc)
           .str(", stval ")
           .hex(tval)
           .c_str());
}
