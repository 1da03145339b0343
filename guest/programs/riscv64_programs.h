// The RV64 guest's programs; the name table is riscv64_registry.cpp.
//   firmware mode (no BootInfo; the boot hart runs it and starts the others):
//     program_smoke, program_fault;
//   lockvisor mode (BootInfo::program; every hart runs it, then DONE):
//     the rest, and program_fault.
#pragma once

namespace guest::riscv {
void program_smoke();
void program_fault();
void program_lockbench();
void program_uncontended();
void program_torture();
void program_sbi_pvlock();
void program_kick_before_wait();
}  // namespace guest::riscv
