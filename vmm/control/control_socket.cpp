#include "vmm/control/control_socket.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>

#include "vmm/util/error.h"

namespace lockvisor::control {
namespace {

sockaddr_un address_of(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty()) fail("--api: the socket path is empty");
  if (path.size() >= sizeof(address.sun_path))
    fail("--api {}: longer than {} bytes (the limit of a Unix socket path)", path, sizeof(address.sun_path) - 1);
  if (path.find('\0') != std::string::npos) fail("--api: the socket path contains a NUL byte");
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  return address;
}

// True when nothing listens on the socket at `path` (connect is refused):
// a leftover of a run that did not clean up. Anything else (it answers, or
// we cannot tell) is not stale.
bool stale_socket(const sockaddr_un& address) {
  UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!probe.valid()) return false;
  const int rc = ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  return rc != 0 && errno == ECONNREFUSED;
}

}  // namespace

ControlSocket::ControlSocket(std::string path) : path_(std::move(path)) {
  const sockaddr_un address = address_of(path_);
  struct stat existing {};
  if (::lstat(path_.c_str(), &existing) == 0) {
    if (!S_ISSOCK(existing.st_mode))
      fail("--api {}: exists and is not a socket (refusing to replace it)", path_);
    if (!stale_socket(address))
      fail("--api {}: a socket that is in use or not ours (another lockvisor run?); choose another path", path_);
    if (::unlink(path_.c_str()) != 0 && errno != ENOENT)
      fail("--api {}: cannot remove the stale socket: {}", path_, std::strerror(errno));
  } else if (errno != ENOENT) {
    fail("--api {}: {}", path_, std::strerror(errno));
  }
  listener_ = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!listener_.valid()) fail_host("--api: socket(AF_UNIX): {}", std::strerror(errno));
  // bind() creates the file with 0777 & ~umask: with 0177 it is 0600 from
  // its first moment, so nobody ever sees it more open (the chmod below
  // still covers a directory whose default ACL overrides the umask). The
  // umask is the process's: this runs before the VM has started any thread.
  const mode_t saved_umask = ::umask(S_IXUSR | S_IRWXG | S_IRWXO);
  const int bound_rc = ::bind(listener_.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  const int bind_errno = errno;
  ::umask(saved_umask);
  if (bound_rc != 0) fail("--api {}: cannot bind: {}", path_, std::strerror(bind_errno));
  created_ = true;
  struct stat bound {};
  if (::lstat(path_.c_str(), &bound) != 0 || !S_ISSOCK(bound.st_mode)) {
    created_ = false;  // someone replaced it already: never unlink what is not ours
    fail_host("--api {}: the socket vanished right after bind", path_);
  }
  dev_ = bound.st_dev;
  ino_ = bound.st_ino;
  // Before listen(): until then every connect is refused, so nobody but the
  // owner ever gets a connection.
  if (::chmod(path_.c_str(), S_IRUSR | S_IWUSR) != 0) {
    const int error = errno;
    remove();
    fail_host("--api {}: chmod 0600: {}", path_, std::strerror(error));
  }
  if (::listen(listener_.get(), kListenBacklog) != 0) {
    const int error = errno;
    remove();
    fail_host("--api {}: listen: {}", path_, std::strerror(error));
  }
}

void ControlSocket::remove() {
  if (!created_) return;
  created_ = false;
  struct stat now {};
  if (::lstat(path_.c_str(), &now) == 0 && S_ISSOCK(now.st_mode) && now.st_dev == dev_ && now.st_ino == ino_)
    ::unlink(path_.c_str());
}

}  // namespace lockvisor::control
