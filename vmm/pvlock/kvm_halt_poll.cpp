#include "vmm/pvlock/kvm_halt_poll.h"

#include <linux/kvm.h>
#include <sys/ioctl.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "vmm/util/error.h"

namespace lockvisor::pvlock {

std::string apply_kvm_halt_poll(int vm_fd, const HaltPollSetting& setting) {
  const std::uint64_t max_ns = setting.mode == HaltPollMode::kOff ? 0 : std::uint64_t{setting.us} * 1000;
  if (::ioctl(vm_fd, KVM_CHECK_EXTENSION, KVM_CAP_HALT_POLL) <= 0)
    fail_host("--halt-poll {}: this kernel has no KVM_CAP_HALT_POLL (Linux >= 5.18)", format_halt_poll(setting));
  kvm_enable_cap cap{};
  cap.cap = KVM_CAP_HALT_POLL;
  cap.args[0] = max_ns;
  if (::ioctl(vm_fd, KVM_ENABLE_CAP, &cap) != 0)
    fail_host("--halt-poll {}: KVM_ENABLE_CAP(KVM_CAP_HALT_POLL): {}", format_halt_poll(setting), std::strerror(errno));
  return fmt::format("max_halt_poll_ns={}{}", max_ns,
                     setting.mode == HaltPollMode::kFixed ? " (KVM adapts below it: no fixed window)" : "");
}

}  // namespace lockvisor::pvlock
