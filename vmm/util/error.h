// The one exception type of the VMM library: a message meant for the user,
// printed as a single line by the command-line front end.
#pragma once
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace lockvisor {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace lockvisor
