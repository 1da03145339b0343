// The RV64 guest's negative control: one hart executes an illegal
// instruction. Under firmware the trap vector (guest/arch/riscv64/entry.S)
// must name it ("FAIL: hart 0: trap: illegal instruction ...") and power off
// with "system failure": tests/riscv/boot_guest.sh checks that a faulting
// guest is seen to fail, not to hang or pass. Under lockvisor (program
// `fault`) the trap goes to the VMM as kLvSbiTrap, which names it; the other
// harts report DONE.
#include "programs/riscv64_programs.h"
#include "runtime/riscv64/hart.h"

namespace guest::riscv {

void program_fault() {
  if (this_hart() != boot_hart()) return;
  print_line("executing an illegal instruction on purpose");
  asm volatile("unimp");
  print_line("the illegal instruction did not trap");
}

}  // namespace guest::riscv
