// spawn: every worker forks, the child executes this program with
// --spawn-child (which exits at once), and the worker waits for it; one
// operation is one completed fork + exec + exit + wait, like UnixBench's
// spawn and execl tests together. The kernel side is the process
// lifecycle: copy_process takes the tasklist_lock for writing (a queued
// rwlock, whose waiters queue on a spinlock) and the pid allocator's
// pidmap_lock; fork copies the address space under the mmap lock and the
// page-table locks; exec replaces it; exit and wait take the tasklist_lock
// again (release_task, wait_task_zombie) and the parent's siglock. All of
// these are shared by every worker, since they are all one process's
// threads forking children of one parent.
#include <cerrno>
#include <cstring>

#include <sys/wait.h>
#include <unistd.h>

#include "guest/linux/console_protocol.h"
#include "guest/linux/workloads/workloads.h"

namespace lockvisor::linux_init {
namespace {

class Spawn final : public Workload {
 public:
  explicit Spawn(std::string self) : self_(std::move(self)), child_argument_(kSpawnChildArgument) {}

  std::optional<std::string> prepare(unsigned, const Parameters&) override {
    if (::access(self_.c_str(), X_OK) != 0)
      return "cannot execute " + self_ + ": " + std::strerror(errno);
    return std::nullopt;
  }

  void run(Worker& worker) override {
    // Built before the loop: between fork and exec the child of a
    // multi-threaded process may only make async-signal-safe calls.
    char* const argv[] = {self_.data(), child_argument_.data(), nullptr};
    char* const envp[] = {nullptr};
    worker.loop([&] {
      const pid_t pid = ::fork();
      if (pid < 0) {
        worker.fail(std::string("fork: ") + std::strerror(errno));
        return false;
      }
      if (pid == 0) {
        ::execve(argv[0], argv, envp);
        ::_exit(127);
      }
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
          worker.fail(std::string("waitpid: ") + std::strerror(errno));
          return false;
        }
      }
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        worker.fail("the spawned child ended with status " + std::to_string(status));
        return false;
      }
      return true;
    });
  }

 private:
  std::string self_;
  std::string child_argument_;
};

}  // namespace

std::unique_ptr<Workload> make_spawn_workload(const std::string& self) { return std::make_unique<Spawn>(self); }

}  // namespace lockvisor::linux_init
