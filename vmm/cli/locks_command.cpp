// lockvisor locks: the lock algorithms the guest runtime offers.
#include <fmt/format.h>

#include "locks/registry.h"
#include "vmm/cli/commands.h"

namespace lockvisor::cli {

Action add_locks_command(CLI::App& app) {
  app.add_subcommand("locks", "List the lock algorithms (for --lock)");
  return [] {
    for (const auto& lock : locks::kLocks) fmt::print("{:<12} {}\n", lock.name, lock.description);
    return 0;
  };
}

}  // namespace lockvisor::cli
