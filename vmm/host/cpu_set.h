// Host CPU lists ("0", "0-1", "0,2-3") and vCPU-thread placement.
#pragma once
#include <pthread.h>

#include <cstddef>
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
// vmm/host/host_cpus.h). `option` names where the CPUs came from in the
// message (--vnuma's node CPUs are checked too, without any --pcpus).
void validate_cpus(const std::vector<int>& cpus, const char* option = "--pcpus");

// The host CPUs thread `index` of a VM (a vCPU, or a native run's host
// thread) may run on, given --pcpus `cpus`: with `spread` one each in turn
// (thread i on cpus[i % n], so more threads than CPUs share them); else all
// of them. Empty `cpus`: empty, the thread is not pinned.
std::vector<int> thread_cpus(const std::vector<int>& cpus, std::size_t index, bool spread);

// Restricts `thread` to `cpus`; throws on failure.
void set_thread_affinity(pthread_t thread, const std::vector<int>& cpus);
std::vector<int> thread_affinity(pthread_t thread);

}  // namespace lockvisor::host
