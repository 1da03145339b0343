#include "vmm/util/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "vmm/util/error.h"
#include "vmm/util/unique_fd.h"

namespace lockvisor {
namespace {

// Errors that say the path is wrong for this user (exit 2); anything else
// (ENOSPC, EIO, EDQUOT, EFBIG...) is the host failing us (exit 6).
bool path_problem(int error) {
  switch (error) {
    case EACCES: case EPERM: case EROFS: case ENOENT: case ENOTDIR:
    case ENAMETOOLONG: case ELOOP: case EISDIR: case EXDEV:
      return true;
    default:
      return false;
  }
}

[[noreturn]] void fail_errno(const std::string& prefix, const char* what, int error) {
  if (path_problem(error)) fail("{}: {}: {}", prefix, what, std::strerror(error));
  fail_host("{}: {}: {}", prefix, what, std::strerror(error));
}

const char* file_kind(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Removes the temporary unless released: every failure path, exceptions
// included, leaves the directory as it was.
class TemporaryGuard {
 public:
  TemporaryGuard(int directory, std::string name) : directory_(directory), name_(std::move(name)) {}
  TemporaryGuard(const TemporaryGuard&) = delete;
  TemporaryGuard& operator=(const TemporaryGuard&) = delete;
  ~TemporaryGuard() {
    if (!name_.empty()) ::unlinkat(directory_, name_.c_str(), 0);
  }
  const std::string& name() const { return name_; }
  void release() { name_.clear(); }

 private:
  int directory_;
  std::string name_;
};

struct Temporary {
  UniqueFd fd;
  TemporaryGuard guard;
};

class Target {
 public:
  Target(const std::string& prefix, const std::string& directory, const std::string& name)
      : prefix_(prefix), name_(name) {
    int raw = -1;
    do raw = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    while (raw < 0 && errno == EINTR);
    if (raw < 0) {
      const int error = errno;  // before fmt::format can touch it
      fail_errno(prefix_, fmt::format("directory {}", directory).c_str(), error);
    }
    directory_ = UniqueFd(raw);
  }

  // Refuses an existing target that is not a regular file. lstat semantics:
  // a symlink is refused as itself, never followed; nothing is opened, so a
  // FIFO cannot block us. Returns the permission bits of the file it would
  // replace (nullopt: none exists), so the replacement keeps them.
  std::optional<mode_t> check() const {
    struct stat st {};
    if (::fstatat(directory_.get(), name_.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      if (!S_ISREG(st.st_mode))
        fail("{}: is {}, not a regular file: refusing to replace it", prefix_, file_kind(st.st_mode));
      return st.st_mode & 0777;  // never set-ID or sticky bits on a file we create
    }
    if (errno != ENOENT) fail_errno(prefix_, "cannot check the target", errno);
    return std::nullopt;
  }

  // A new file next to the target, under a random name that nothing can
  // have planted: O_EXCL fails on any existing entry, symlinks included.
  Temporary create_temporary() const {
    const std::string stem = "." + name_.substr(0, 200) + ".";
    for (int attempt = 0; attempt < 100; ++attempt) {
      const std::string name = fmt::format("{}{:08x}.tmp", stem, ::arc4random());
      const int raw =
          ::openat(directory_.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
      if (raw >= 0) return Temporary{UniqueFd(raw), TemporaryGuard(directory_.get(), name)};
      if (errno != EEXIST && errno != EINTR) fail_errno(prefix_, "cannot create a file in its directory", errno);
    }
    fail_host("{}: no free temporary name after 100 attempts", prefix_);
  }

  void replace_with(std::string_view bytes) const {
    const std::optional<mode_t> mode = check();
    Temporary temporary = create_temporary();
    // A replaced file keeps its permissions (a --json file made private
    // stays private); a new one gets 0666 less the umask, as any file does.
    if (mode && ::fchmod(temporary.fd.get(), *mode) != 0)
      fail_host("{}: cannot give the new file the old one's mode: {}", prefix_, std::strerror(errno));
    for (std::size_t done = 0; done < bytes.size();) {
      const ssize_t n = ::write(temporary.fd.get(), bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail_host("{}: write failed: {}", prefix_, std::strerror(n < 0 ? errno : EIO));
      done += static_cast<std::size_t>(n);
    }
    // fsync reports what close() could (delayed write errors), so close's
    // own result is not needed.
    if (::fsync(temporary.fd.get()) != 0) fail_host("{}: fsync failed: {}", prefix_, std::strerror(errno));
    (void)check();  // the target may have been replaced during the run
    if (::renameat(directory_.get(), temporary.guard.name().c_str(), directory_.get(), name_.c_str()) != 0)
      fail_errno(prefix_, "cannot rename the temporary over it", errno);
    temporary.guard.release();
    // Makes the rename itself durable; filesystems without directory fsync say EINVAL.
    if (::fsync(directory_.get()) != 0 && errno != EINVAL && errno != EROFS)
      fail_host("{}: fsync of its directory failed: {}", prefix_, std::strerror(errno));
  }

 private:
  std::string prefix_;
  std::string name_;
  UniqueFd directory_;
};

}  // namespace

OutputFile::OutputFile(std::string path, std::string option) : path_(std::move(path)), option_(std::move(option)) {
  const std::string prefix = fmt::format("{} {}", option_, path_);
  if (path_.empty()) fail("{}: empty path", option_);
  const std::filesystem::path p(path_);
  name_ = p.filename().string();
  if (name_.empty() || name_ == "." || name_ == "..") fail("{}: names a directory, not a file", prefix);
  directory_ = p.has_parent_path() ? p.parent_path().string() : ".";
  const Target target(prefix, directory_, name_);
  (void)target.check();
  target.create_temporary();  // proves the directory writable; removed again at once
}

void OutputFile::write(std::string_view bytes) const {
  Target(fmt::format("{} {}", option_, path_), directory_, name_).replace_with(bytes);
}

}  // namespace lockvisor
