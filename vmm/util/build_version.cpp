#include "vmm/util/build_version.h"

#include <fmt/format.h>

// Generated at every build (cmake/git_describe.cmake); only this file
// includes it, so a new commit recompiles one file.
#include "lockvisor_git_describe.h"

namespace lockvisor::util {

const std::string& build_version() {
  static const std::string text = fmt::format("{} ({})", LOCKVISOR_VERSION, LOCKVISOR_GIT_DESCRIBE);
  return text;
}

}  // namespace lockvisor::util
