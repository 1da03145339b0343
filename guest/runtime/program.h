// Guest programs: what a vCPU runs after boot, chosen by BootInfo::program.
// Every vCPU runs the same program and picks its role from this_cpu().
#pragma once

namespace guest {

struct Program {
  const char* name;
  void (*run)();
};

// nullptr when no program has that name.
const Program* find_program(const char* name);

}  // namespace guest
