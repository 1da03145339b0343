// The RV64 guest's program table: the names BootInfo::program may give
// under lockvisor (runtime/program.h), and what the image runs without a
// BootInfo. Both images hold every program; they differ only in the
// firmware-mode one, LOCKVISOR_RV64_FIRMWARE_PROGRAM
// (guest/arch/riscv64/CMakeLists.txt defines it per image).
#include "programs/riscv64_programs.h"
#include "runtime/program.h"
#include "runtime/riscv64/hart.h"

#ifndef LOCKVISOR_RV64_FIRMWARE_PROGRAM
#error "LOCKVISOR_RV64_FIRMWARE_PROGRAM names the program an image runs under firmware"
#endif

namespace guest {
namespace {

// One row per program every hart runs under lockvisor.
constexpr Program kPrograms[] = {
    {"lockbench", riscv::program_lockbench},
    {"uncontended", riscv::program_uncontended},
    {"torture", riscv::program_torture},
    {"rv-sbi-pvlock", riscv::program_sbi_pvlock},
    {"rv-kick-before-wait", riscv::program_kick_before_wait},
    {"fault", riscv::program_fault},
};

}  // namespace

const Program* find_program(const char* name) { return find_program_in(kPrograms, name); }

}  // namespace guest

void guest::riscv::program_main() { LOCKVISOR_RV64_FIRMWARE_PROGRAM(); }
