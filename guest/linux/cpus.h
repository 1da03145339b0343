// How many CPUs the guest kernel has online, by two independent counts:
// sysconf(_SC_NPROCESSORS_ONLN) and the list in
// /sys/devices/system/cpu/online ("0-3,6"), which a VMM-side bug in the
// MP tables or ACPI would make disagree with the vCPUs it created.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace lockvisor::linux_init {

struct OnlineCpus {
  long sysconf = 0;                  // < 1 when sysconf failed
  std::optional<unsigned> sysfs;     // CPUs in the sysfs list, when it could be read and parsed
  std::string sysfs_list;            // the list as read, without the newline
};

OnlineCpus online_cpus();

// The number of CPUs in a kernel CPU list ("0-3,6" is 5), std::nullopt when
// the text is not such a list (exposed for the tests).
std::optional<unsigned> count_cpu_list(std::string_view list);

}  // namespace lockvisor::linux_init
