// fault: makes this guest take an exception on vCPU 0, so that tests can see
// the VMM report it (vector, error code, RIP) and end the run.
//   kind=gp    `hlt` at CPL3                   -> #GP(0)
//   kind=pf    read 3 GiB (unmapped)           -> #PF
//   kind=ud    ud2                             -> #UD
//   kind=port  `out` to a port outside the ABI -> #GP(0) (the TSS I/O bitmap denies it)
//   kind=bp    a stray int3                    -> #BP (only kernel_halt's int3 halts)
// The faulting instructions live in .text.deliberate_fault, the one region
// of CPL3 code that tests/guest_image's guard exempts.
#include "programs/programs.h"
#include "runtime/boot.h"
#include "runtime/check.h"
#include "runtime/cpu.h"
#include "runtime/pv.h"
#include "runtime/string.h"

#define LV_DELIBERATE_FAULT __attribute__((section(".text.deliberate_fault"), noipa))

namespace guest {
namespace {
// A port no ABI call uses: denied by every vCPU's I/O bitmap.
constexpr u16 kPortOutsideAbi = 0x80;

LV_DELIBERATE_FAULT void fault_hlt() { asm volatile("hlt"); }
LV_DELIBERATE_FAULT void fault_ud2() { asm volatile("ud2"); }
LV_DELIBERATE_FAULT void fault_port() { asm volatile("outb %%al, %[port]" : : [port] "i"(kPortOutsideAbi), "a"(0)); }
LV_DELIBERATE_FAULT void fault_breakpoint() { asm volatile("int3"); }
}  // namespace

void program_fault() {
  if (this_cpu() != 0) {
    for (;;) halt();  // wait; the run ends with vCPU 0's fault
  }
  char kind[8] = "gp";
  arg_str("kind", kind, sizeof kind);
  if (str_equal(kind, "gp")) {
    fault_hlt();
  } else if (str_equal(kind, "pf")) {
    LV_CHECK_LE(boot().memory_bytes, 3ull << 30);
    volatile u64* unmapped = reinterpret_cast<volatile u64*>(3ull << 30);
    (void)*unmapped;
  } else if (str_equal(kind, "ud")) {
    fault_ud2();
  } else if (str_equal(kind, "port")) {
    fault_port();
  } else if (str_equal(kind, "bp")) {
    fault_breakpoint();
  }
  assert_fail(__FILE__, __LINE__, "the fault did not happen");
}

}  // namespace guest
