// What only the guest's init does: mounting the pseudo file systems it reads
// and powering the machine off at the end. PID 1 must never return (the
// kernel panics when init exits), so power_off() does not either.
#pragma once
#include <string>
#include <vector>

namespace lockvisor::linux_init {

struct MountOutcome {
  std::string target;
  int error;  // errno of mount(2) (or of mkdir), 0 when mounted
};

// Mounts proc on /proc, sysfs on /sys and devtmpfs on /dev (creating the
// directories when missing). A failure is reported, not fatal: the init
// still runs and says what it could not read.
std::vector<MountOutcome> mount_pseudo_file_systems();

// When the kernel found no /dev/console in the initramfs, the init starts
// without standard streams; once devtmpfs is mounted, open its console as
// fds 0, 1 and 2. Does nothing when fd 1 is already open.
void ensure_console();

// Waits until the console has sent what was written to it (tcdrain: the
// tty layer buffers output, and powering off would cut the end of the
// report), then powers off; halts when that fails; never returns.
[[noreturn]] void power_off();

}  // namespace lockvisor::linux_init
