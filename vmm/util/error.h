// The one exception type of the VMM library: a message meant for the user,
// printed as a single line by the command-line front end, and whose fault it
// is, which decides the exit code (README.md, "Exit codes").
#pragma once
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace lockvisor {

enum class ErrorKind {
  kUsage,  // bad command line or bad input (an option, an image file, a --json path): exit 2
  kHost,   // the host failed us: no usable KVM, a KVM call or a host syscall failed: exit 6
  kGuest,  // the guest misbehaved (e.g. reported malformed results): exit 3
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, ErrorKind kind = ErrorKind::kUsage)
      : std::runtime_error(what), kind_(kind) {}
  explicit Error(const char* what, ErrorKind kind = ErrorKind::kUsage) : std::runtime_error(what), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

// Bad command line or bad input.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...), ErrorKind::kUsage);
}

// The host failed: opening the KVM device, a KVM ioctl, a missing KVM
// capability, mmap, affinity and other host syscalls.
template <typename... Args>
[[noreturn]] void fail_host(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...), ErrorKind::kHost);
}

// The guest misbehaved.
template <typename... Args>
[[noreturn]] void fail_guest(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...), ErrorKind::kGuest);
}

}  // namespace lockvisor
