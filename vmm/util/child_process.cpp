#include "vmm/util/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "vmm/util/error.h"
#include "vmm/util/unique_fd.h"

namespace lockvisor {
namespace {

int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv_text, const std::string& log_path,
                           const std::vector<int>& inherit_fds) {
  std::vector<std::string> args = argv_text;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  UniqueFd log(::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!log.valid()) fail_host("{}: cannot create: {}", log_path, std::strerror(errno));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) fail_host("cannot start {}: fork: {}", argv_text.at(0), std::strerror(errno));
  if (pid == 0) {
    // Async-signal-safe calls only until exec.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
    ::dup2(log.get(), 1);
    ::dup2(log.get(), 2);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    for (const int fd : inherit_fds) ::fcntl(fd, F_SETFD, 0);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  pid_ = pid;
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), exit_code_(other.exit_code_) {}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) kill_and_reap();
}

std::optional<int> ChildProcess::poll() {
  if (pid_ <= 0) return exit_code_;
  int status = 0;
  const pid_t done = ::waitpid(pid_, &status, WNOHANG);
  if (done == pid_) {
    pid_ = -1;
    exit_code_ = exit_code_of(status);
    return exit_code_;
  }
  if (done < 0 && errno != EINTR) fail_host("waitpid: {}", std::strerror(errno));
  return std::nullopt;
}

void ChildProcess::signal(int signal) {
  if (pid_ > 0) ::kill(pid_, signal);
}

int ChildProcess::kill_and_reap() {
  if (pid_ <= 0) return exit_code_;
  ::kill(pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  exit_code_ = exit_code_of(status);
  return exit_code_;
}

}  // namespace lockvisor
