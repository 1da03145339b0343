// The RV64 guest's harts: who am I, how many of us, start the others, print
// one line at a time, stop with a verdict. guest/arch/riscv64/entry.S brings
// each hart to C++ (rv_boot_main, rv_secondary_main); this is what it finds.
#pragma once
#include "lockvisor/abi/riscv_boot.h"
#include "lockvisor/abi/types.h"
#include "runtime/format.h"

namespace guest::riscv {
using namespace lockvisor::abi;

// This hart's id (entry.S keeps it in tp), 0..kRiscvMaxHarts-1.
inline unsigned this_hart() {
  u64 id;
  asm("mv %0, tp" : "=r"(id));
  return static_cast<unsigned>(id);
}

// Harts of the machine (counted at boot through SBI HSM; ids 0..n-1).
unsigned hart_count();
unsigned boot_hart();
// The rate of the `time` CSR (the lock clock), from the device tree at boot.
u64 lock_clock_khz();

// Starts every other hart; each calls `fn` on its own stack, then stops.
// Returns once all of them are running.
void start_other_harts(void (*fn)());

// One whole line on the console (the harts take turns).
void print_line(const Text& line);
void print_line(const char* line);

// "lockvisor rv64 guest: N harts, boot hart B, lock clock K kHz": the first
// line of every boot (the boot hart prints it before any program runs).
void print_banner();

// The firmware-mode program's verdict: a final "PASS"/"FAIL" line, then SBI
// SRST power-off with reason "none" or "system failure".
[[noreturn]] void finish(bool ok);
// A broken invariant. Before an accepted BootInfo (firmware mode, or a
// BootInfo still being checked): "FAIL: hart N: what", then finish(false).
// Under lockvisor: a failed check on the report channel (assert_fail).
[[noreturn]] void fail(const char* what);

// What the image runs without a BootInfo (firmware mode): called on the
// boot hart once the machine is counted; one per image
// (programs/riscv64_registry.cpp). With a BootInfo, every hart runs the
// program it names (runtime/program.h's find_program) and then reports DONE.
void program_main();

}  // namespace guest::riscv
