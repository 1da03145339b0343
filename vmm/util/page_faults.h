// Page faults the calling thread has taken, for start-up breakdowns: a fault
// costs microseconds on a virtualized host (2-3 us on a PVM host), so their
// count says where a build's time goes on any host, however fast.
#pragma once
#include <sys/resource.h>

#include <cstdint>

namespace lockvisor {

// Minor page faults (served without I/O) of the calling thread so far.
inline std::uint64_t thread_minor_faults() {
  rusage usage{};
  return ::getrusage(RUSAGE_THREAD, &usage) == 0 ? static_cast<std::uint64_t>(usage.ru_minflt) : 0;
}

}  // namespace lockvisor
