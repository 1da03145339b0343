#include "programs/programs.h"
#include "runtime/program.h"

namespace guest {
namespace {

// One row per program: the name the VMM passes in BootInfo::program.
constexpr Program kPrograms[] = {
    {"empty", program_empty},
    {"hello", program_hello},
    {"kick-wake", program_kick_wake},
    {"sticky-kick", program_sticky_kick},
    {"halt-for", program_halt_for},
    {"kick-targets", program_kick_targets},
    {"pv-off", program_pv_off},
    {"lost-wakeup", program_lost_wakeup},
    {"wake-conformance", program_wake_conformance},
    {"sbi-pvlock", program_sbi_pvlock},
    {"pingpong", program_pingpong},
    {"fault", program_fault},
    {"platform", program_platform},
    {"bench-doorbell", program_bench_doorbell},
    {"lockbench", program_lockbench},
    {"uncontended", program_uncontended},
    {"torture", program_torture},
    {"hostile", program_hostile},
    {"runstate", program_runstate},
    {"vnuma", program_vnuma},
};

}  // namespace

const Program* find_program(const char* name) { return find_program_in(kPrograms, name); }

}  // namespace guest
