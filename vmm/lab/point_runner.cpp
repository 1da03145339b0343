#include "vmm/lab/point_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "vmm/machine/run_result.h"
#include "vmm/machine/stop_signals.h"
#include "vmm/util/error.h"
#include "vmm/util/unique_fd.h"

namespace lockvisor::lab {

std::string outcome_for_exit_code(int code) {
  using machine::Outcome;
  for (auto o : {Outcome::kCompleted, Outcome::kGuestFailed, Outcome::kUsageError, Outcome::kGuestFault,
                 Outcome::kTimeout, Outcome::kDeadlock, Outcome::kHostError, Outcome::kInterrupted})
    if (machine::exit_code(o) == code) return machine::outcome_name(o);
  if (code > 128) return fmt::format("killed-by-signal-{}", code - 128);
  return fmt::format("exit-code-{}", code);
}

PointRun run_point(const std::string& lockvisor_path, const std::vector<std::string>& args, const std::string& json_path,
                   const std::string& log_path, double timeout_s) {
  std::vector<std::string> argv_text = {lockvisor_path, "run"};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  argv_text.insert(argv_text.end(), {"--json", json_path});
  std::vector<char*> argv;
  for (auto& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::unlink(json_path.c_str());
  UniqueFd log(::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!log.valid()) fail_host("{}: cannot create: {}", log_path, std::strerror(errno));
  const pid_t parent = ::getpid();
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) fail_host("cannot start a point: fork: {}", std::strerror(errno));
  if (pid == 0) {
    // Async-signal-safe calls only until exec.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(log.get(), 1);
    ::dup2(log.get(), 2);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  PointRun run;
  int status = 0;
  bool timed_out = false, forwarded = false;
  auto forwarded_at = start;
  while (true) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) fail_host("waitpid: {}", std::strerror(errno));
    const auto now = std::chrono::steady_clock::now();
    if (!forwarded && machine::stop_signal() != 0) {
      // The child of a terminal's Ctrl-C has it already; a SIGTERM sent to
      // the lab alone is passed on, so the point ends as "interrupted".
      ::kill(pid, SIGTERM);
      forwarded = true;
      forwarded_at = now;
      run.interrupted = true;
    }
    if ((forwarded && now - forwarded_at > std::chrono::seconds(2)) ||
        (!forwarded && std::chrono::duration<double>(now - start).count() > timeout_s)) {
      timed_out = !forwarded;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  run.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  run.outcome = timed_out ? "lab-timeout" : outcome_for_exit_code(run.exit_code);
  if (run.exit_code == 130) run.interrupted = true;
  std::ifstream in(json_path);
  if (in) {
    try {
      run.report = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception&) {
      run.report = nullptr;  // recorded as a point without a report
    }
  }
  ::unlink(json_path.c_str());
  return run;
}

}  // namespace lockvisor::lab
