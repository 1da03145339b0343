// What this lockvisor binary is: its release and the commit it was built
// from. Every report that names lockvisor (a run's `host.lockvisor_version`,
// a lab's `version`, `--version`) reads it here.
#pragma once

#include <string>

namespace lockvisor::util {

// "0.1.0 (git 1a2b3c4)": the project's version and `git describe` of the
// tree at build time ("-dirty" with uncommitted changes), or "0.1.0 (not a
// git checkout)" for a source tree without its history.
const std::string& build_version();

}  // namespace lockvisor::util
