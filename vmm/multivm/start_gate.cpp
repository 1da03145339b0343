#include "vmm/multivm/start_gate.h"

#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "vmm/machine/stop_signals.h"
#include "vmm/util/error.h"

namespace lockvisor::multivm {

std::int64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

GateChannel make_gate_channel() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    fail_host("start gate: socketpair: {}", std::strerror(errno));
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

GateTimes wait_at_start_gate(int fd) {
  const std::int64_t ready_ns = monotonic_ns();
  if (::write(fd, &kReadyByte, 1) != 1) fail_host("start gate: cannot report ready: {}", std::strerror(errno));
  const auto deadline = std::chrono::steady_clock::now() + kGateWait;
  while (true) {
    machine::throw_if_stop_signalled();
    if (std::chrono::steady_clock::now() > deadline)
      fail_host("start gate: not opened within {} s", kGateWait.count());
    pollfd p{fd, POLLIN, 0};
    // Short slices: a stop signal is seen within 50 ms.
    const int n = ::poll(&p, 1, 50);
    if (n < 0 && errno != EINTR) fail_host("start gate: poll: {}", std::strerror(errno));
    if (n <= 0) continue;
    char message[1 + sizeof(std::int64_t)];
    std::size_t have = 0;
    // The 9 bytes arrive in one write; a short read only means "not yet".
    while (have < sizeof message) {
      const ssize_t got = ::read(fd, message + have, sizeof message - have);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) fail_host("start gate: the parent went away before opening it");
      have += static_cast<std::size_t>(got);
    }
    if (message[0] != kGoByte) fail_host("start gate: unexpected message from the parent");
    std::int64_t start_ns = 0;
    std::memcpy(&start_ns, message + 1, sizeof start_ns);
    const auto lead = std::chrono::nanoseconds(start_ns - monotonic_ns());
    if (lead > kStartLead * 2) fail_host("start gate: start time {} ns away, more than twice the lead", lead.count());
    const timespec at{static_cast<time_t>(start_ns / 1000000000), static_cast<long>(start_ns % 1000000000)};
    while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, nullptr) == EINTR) {
    }
    return {.ready_ns = ready_ns, .start_ns = start_ns};
  }
}

bool open_start_gate(int fd, std::int64_t start_ns) {
  char message[1 + sizeof start_ns];
  message[0] = kGoByte;
  std::memcpy(message + 1, &start_ns, sizeof start_ns);
  return ::write(fd, message, sizeof message) == static_cast<ssize_t>(sizeof message);
}

}  // namespace lockvisor::multivm
