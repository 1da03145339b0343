// Guest programs: what a vCPU runs after boot, chosen by BootInfo::program.
// Every vCPU runs the same program and picks its role from this_cpu().
#pragma once
#include "runtime/string.h"

namespace guest {

struct Program {
  const char* name;
  void (*run)();
};

// nullptr when no program has that name.
const Program* find_program(const char* name);

// find_program's search: the row of `table` called `name`, or nullptr.
template <unsigned N>
const Program* find_program_in(const Program (&table)[N], const char* name) {
  for (const Program& p : table)
    if (str_equal(p.name, name)) return &p;
  return nullptr;
}

}  // namespace guest
