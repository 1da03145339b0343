// A child process of this one (a `lockvisor run` VM, a lab point): started
// with fork/exec, stdout and stderr to a log file, stdin from /dev/null, and
// killed with SIGKILL when this process dies (PR_SET_PDEATHSIG), so that no
// orphan VM outlives its parent. The lab's point runner and the multi-VM run
// share it.
//
// Invariant: the pid is > 0 from start() until the child is reaped, and no
// signal is ever sent after that (a reaped pid may belong to another process;
// a pid <= 0 would signal a process group or every process).
#pragma once
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace lockvisor {

class ChildProcess {
 public:
  // Starts argv[0] with these arguments. `inherit_fds` stay open across exec
  // (the others are close-on-exec as created). Throws a host lockvisor::Error
  // if the log cannot be created or fork fails; an exec failure is exit 127.
  ChildProcess(const std::vector<std::string>& argv, const std::string& log_path, const std::vector<int>& inherit_fds = {});
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&&) = delete;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  // A child still running is killed (SIGKILL) and reaped.
  ~ChildProcess();

  // Without blocking: the exit code once it has ended (128 + signal when a
  // signal ended it), nullopt while it runs.
  std::optional<int> poll();
  // Sends `signal` if the child has not been reaped yet.
  void signal(int signal);
  // SIGKILL, then waits for it: the exit code.
  int kill_and_reap();
  bool running() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
  int exit_code_ = -1;
};

}  // namespace lockvisor
