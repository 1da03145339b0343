// The control socket's file: a listening Unix stream socket that only its
// owner can connect to.
//
// Security model (docs/control-socket.md): the socket is chmod 0600 after
// bind() and before listen(), so no other user can ever connect (a socket
// that is not listening refuses every connect); the server also checks each
// peer's credentials (SO_PEERCRED). Nothing is ever replaced: a path that
// exists is refused unless it is a socket nobody listens on (a stale one
// from a run that was killed), and only such a socket is unlinked. The file
// is removed when the owner is destroyed or remove() is called, and only if
// the path still names the socket this object created.
#pragma once
#include <sys/types.h>

#include <string>

#include "vmm/util/unique_fd.h"

namespace lockvisor::control {

class ControlSocket {
 public:
  // Binds and listens at `path`; throws lockvisor::Error (usage: a bad path,
  // one in use or not a socket; host: a syscall failed).
  explicit ControlSocket(std::string path);
  ~ControlSocket() { remove(); }
  ControlSocket(const ControlSocket&) = delete;
  ControlSocket& operator=(const ControlSocket&) = delete;

  const std::string& path() const { return path_; }
  // The listening descriptor, handed to the server once (invalid afterwards).
  UniqueFd take_listener() { return std::move(listener_); }
  // Unlinks the socket file if the path still names it. Idempotent.
  void remove();

 private:
  std::string path_;
  UniqueFd listener_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  bool created_ = false;
};

// How many connections wait for accept() while the monitor loop is busy.
inline constexpr int kListenBacklog = 16;

}  // namespace lockvisor::control
