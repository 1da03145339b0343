// Runs a program to its end and collects its output (stdout and stderr
// together), for the tests of the Linux /init run natively.
#pragma once
#include <sys/wait.h>

#include <cerrno>

#include <string>
#include <vector>

#include "tests/linux/test_files.h"
#include "tests/support/spawn_process.h"

namespace lockvisor::test {

struct ProgramRun {
  int exit_code = -1;  // 128 + signal when a signal ended it; -1 when it could not start
  std::string output;
};

inline ProgramRun run_program(const std::string& binary, const std::vector<std::string>& args) {
  TempDir dir;
  const std::string out = dir.file("output");
  ProgramRun run;
  const pid_t pid = spawn_process(binary, args, out);
  if (pid <= 0) return run;
  int status = 0;
  pid_t waited;
  do {
    waited = ::waitpid(pid, &status, 0);
  } while (waited < 0 && errno == EINTR);
  if (waited != pid) return run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  run.output = read_text_file(out);
  return run;
}

}  // namespace lockvisor::test
