// Programs that halt take `halt=hypercall|kernel` so that one program checks
// both halts: the HALT hypercall (CPL3) and a real `hlt` at CPL0.
#pragma once
#include "runtime/boot.h"
#include "runtime/pv.h"
#include "runtime/string.h"

namespace guest {

inline bool use_kernel_halt() {
  char kind[16];
  return arg_str("halt", kind, sizeof kind) && str_equal(kind, "kernel");
}

inline void halt_as_configured(bool kernel) {
  if (kernel)
    kernel_halt();
  else
    halt();
}

}  // namespace guest
