#include "guest/linux/pid1.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

namespace lockvisor::linux_init {
namespace {

MountOutcome mount_one(const char* source, const char* target, const char* type) {
  if (::mkdir(target, 0755) != 0 && errno != EEXIST) return {target, errno};
  if (::mount(source, target, type, MS_NOSUID | MS_NOEXEC, nullptr) != 0) return {target, errno};
  return {target, 0};
}

}  // namespace

std::vector<MountOutcome> mount_pseudo_file_systems() {
  return {mount_one("proc", "/proc", "proc"), mount_one("sysfs", "/sys", "sysfs"),
          mount_one("devtmpfs", "/dev", "devtmpfs")};
}

void ensure_console() {
  if (::fcntl(1, F_GETFD) != -1) return;
  const int fd = ::open("/dev/console", O_RDWR | O_NOCTTY);
  if (fd < 0) return;
  // The kernel gives init fds 0..2 in this order when it can; do the same.
  for (int target = 0; target <= 2; ++target)
    if (fd != target) ::dup2(fd, target);
  if (fd > 2) ::close(fd);
}

void power_off() {
  ::tcdrain(1);
  ::sync();
  ::reboot(RB_POWER_OFF);
  // Only reached when the kernel refused (no permission: not really PID 1).
  std::fprintf(stderr, "init: reboot(RB_POWER_OFF) failed: %s; halting\n", std::strerror(errno));
  ::reboot(RB_HALT_SYSTEM);
  for (;;) ::pause();
}

}  // namespace lockvisor::linux_init
