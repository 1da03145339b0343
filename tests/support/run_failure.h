// What a test prints when a guest run did not end the way it expected: the
// outcome, its one-line reason and, for a timeout or a deadlock, every vCPU's
// state line (halted or running, kick pending, last hypercall, RIP of the last
// exit, how often KVM_RUN returned and how often by a signal). A run that hangs
// once in a hundred is diagnosed from this text alone.
#pragma once
#include <string>

#include "vmm/machine/run_result.h"

namespace lockvisor::test {

inline std::string run_failure(const machine::RunResult& run) {
  std::string text = std::string(machine::outcome_name(run.outcome)) + ": " + run.reason;
  for (const auto& line : run.details) text += "\n  " + line;
  return text;
}

}  // namespace lockvisor::test
