// The counting workloads, by name. Each file says which kernel locks its
// operation takes and why it is a fair stand-in for a real program.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "guest/linux/workload.h"

namespace lockvisor::linux_init {

// nullptr for a name that is not a counting workload. `self` is the path of
// this program (the spawn workload executes it).
std::unique_ptr<Workload> make_workload(std::string_view name, const std::string& self);

// Every workload name main accepts, the counting ones and hello, idle.
std::vector<std::string_view> workload_names();

std::unique_ptr<Workload> make_futex_hash_workload();
std::unique_ptr<Workload> make_lockref_workload();
std::unique_ptr<Workload> make_pipe_workload();
std::unique_ptr<Workload> make_spawn_workload(const std::string& self);

}  // namespace lockvisor::linux_init
