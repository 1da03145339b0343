// lockref: every worker opens and closes the same file, over and over. The
// path walk ends on the file's dentry and takes a reference on it, and on
// the root's (lockref_get_not_dead when the RCU walk is made to stick), and
// the close drops them again (dput, lockref_put_return): each are a cmpxchg on the dentry's d_lockref, the
// spinlock and the count packed in one word, which succeeds only while the
// spinlock is free; after enough failed attempts, or when the lock is held,
// the code takes the spinlock d_lock itself. With many CPUs on one file the
// cmpxchg keeps failing and everyone queues on d_lock: the single-file nginx
// case in which Anatoly Stepanov and Nikita Fedorov measured their
// hierarchical queued spinlock ("[RFC PATCH 0/1] HQspinlock - (NUMA-aware)
// Hierarchical Queued spinlock", linux-arch, November 2025), where a few
// pages (index.html) are read far more often than the rest.
//
// Each worker first gives itself its own file descriptor table
// (unshare(CLONE_FILES)), as nginx's worker processes have: otherwise every
// open and close would also take the one table's files_struct::file_lock,
// and that lock, not the dentry's, would be what the workers meet on.
//
// The file is a regular file in /tmp: in the guest, the initramfs's rootfs
// (tmpfs or ramfs, both served from the dentry cache alone, no disk and no
// d_revalidate), natively the host's /tmp. A /proc file would add the proc
// inode's own revalidation to each open.
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include "guest/linux/unique_fd.h"
#include "guest/linux/workloads/workloads.h"

namespace lockvisor::linux_init {
namespace {

class Lockref final : public Workload {
 public:
  ~Lockref() override {
    if (!path_.empty()) ::unlink(path_.c_str());
  }

  std::optional<std::string> prepare(unsigned, const Parameters&) override {
    std::string path = "/tmp/lockvisor-lockref-XXXXXX";
    const UniqueFd fd(::mkstemp(path.data()));
    if (!fd) return std::string("cannot create a file in /tmp: ") + std::strerror(errno);
    path_ = path;
    return std::nullopt;
  }

  void run(Worker& worker) override {
    const char* path = path_.c_str();
    if (::unshare(CLONE_FILES) != 0) {
      worker.fail(std::string("unshare(CLONE_FILES): ") + std::strerror(errno));
      return;
    }
    worker.loop([&] {
      const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        worker.fail(std::string("open: ") + std::strerror(errno));
        return false;
      }
      ::close(fd);
      return true;
    });
  }

 private:
  std::string path_;
};

}  // namespace

std::unique_ptr<Workload> make_lockref_workload() { return std::make_unique<Lockref>(); }

}  // namespace lockvisor::linux_init
