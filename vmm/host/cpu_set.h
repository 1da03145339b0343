// Host CPU lists ("0", "0-1", "0,2-3") and vCPU-thread placement.
#pragma once
#include <pthread.h>

#include <string>
#include <vector>

namespace lockvisor::host {

// Parses a CPU list; throws lockvisor::Error with a one-line reason.
std::vector<int> parse_cpu_list(const std::string& text);
std::string format_cpu_list(const std::vector<int>& cpus);

// CPUs this process may run on (sched_getaffinity).
std::vector<int> allowed_cpus();
// Number of CPUs the host has (configured), for error messages.
int host_cpu_count();

// Throws if a CPU does not exist or is outside this process's affinity (or,
// when LOCKVISOR_HOST_CPUS declares another host's CPUs, outside those:
// vmm/host/host_cpus.h).
void validate_cpus(const std::vector<int>& cpus);

// Restricts `thread` to `cpus`; throws on failure.
void set_thread_affinity(pthread_t thread, const std::vector<int>& cpus);
std::vector<int> thread_affinity(pthread_t thread);

}  // namespace lockvisor::host
