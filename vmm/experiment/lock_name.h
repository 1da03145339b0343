// Whether a lock name is one of the registry's (guest/locks/registry.h), and
// the refusal when it is not: every host path that takes a lock name (run,
// bench, the lab's points, the native runner) asks here, so each refuses an
// unknown name before anything runs and in the same words. The guest checks
// its record again on its own side: it cannot trust the host.
#pragma once
#include <string_view>

#include "locks/registry.h"

namespace lockvisor::experiment {

// The registry's row of `name`; a usage lockvisor::Error naming the known
// locks when there is none.
const locks::LockInfo& known_lock(std::string_view name);

}  // namespace lockvisor::experiment
