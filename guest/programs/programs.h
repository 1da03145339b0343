// Every guest program's entry point; the name table is registry.cpp.
#pragma once

namespace guest {
void program_empty();
void program_hello();
void program_kick_wake();
void program_sticky_kick();
void program_halt_for();
void program_kick_targets();
void program_pv_off();
void program_lost_wakeup();
void program_wake_conformance();
void program_sbi_pvlock();
void program_pingpong();
void program_fault();
void program_platform();
void program_bench_doorbell();
void program_lockbench();
void program_uncontended();
void program_torture();
void program_hostile();
void program_runstate();
void program_vnuma();
}  // namespace guest
