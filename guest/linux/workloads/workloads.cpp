#include "guest/linux/workloads/workloads.h"

#include <iterator>

#include "guest/linux/console_protocol.h"

namespace lockvisor::linux_init {

std::unique_ptr<Workload> make_workload(std::string_view name, const std::string& self) {
  if (name == "futex-hash") return make_futex_hash_workload();
  if (name == "lockref") return make_lockref_workload();
  if (name == "pipe") return make_pipe_workload();
  if (name == "spawn") return make_spawn_workload(self);
  return nullptr;
}

std::vector<std::string_view> workload_names() {
  return {std::begin(kWorkloadNames), std::end(kWorkloadNames)};
}

}  // namespace lockvisor::linux_init
