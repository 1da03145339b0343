// The process's open-file limit (RLIMIT_NOFILE) against what a VM is about to
// open. Every vCPU holds KVM descriptors of its own, so a VM of 1024 vCPUs
// needs more than the soft limit most shells start with (1024), while the
// hard limit is usually far higher (systemd: 524288). Raising the soft limit
// up to the hard one needs no privilege.
#pragma once
#include <cstdint>
#include <string_view>

namespace lockvisor::host {

// Descriptors open in this process now (the entries of /proc/self/fd).
std::uint64_t open_file_count();

// Makes room for `more` descriptors beside those open now: raises the soft
// limit when it is short, up to the hard limit. Throws a host
// lockvisor::Error, one line starting with `what`, when even the hard limit
// is too low.
void make_room_for_files(std::uint64_t more, std::string_view what);

}  // namespace lockvisor::host
