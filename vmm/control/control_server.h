// The control socket's server: accepts clients on a listening Unix socket
// and answers their request lines (control_protocol.h), entirely on one
// Boost.Asio io_context (the Machine's monitor loop): no thread of its own,
// no blocking call, every buffer bounded.
//
// Bounds (docs/control-socket.md):
//   - at most kMaxClients connections at once; one more gets an error line
//     and is closed;
//   - a request line longer than kMaxRequestBytes gets an error line and the
//     connection is closed (what it sent beyond is never buffered);
//   - replies waiting for a client that does not read are bounded by
//     kMaxPendingReplyBytes; past that the connection is closed;
//   - a peer whose uid is neither ours nor root's is refused (defence in
//     depth: the 0600 socket already keeps other users out);
//   - a client that sends no request for kIdleTimeout gets an error line
//     and is closed, so a forgotten `nc` cannot hold one of the slots for
//     the whole run.
// A client that disconnects, mid-line or not, only ends its own session.
// stop() closes the listener and every connection (clients see EOF); after
// it the server touches nothing, and it must be called before the
// io_context is destroyed.
#pragma once
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <set>

#include "vmm/control/control_protocol.h"
#include "vmm/util/unique_fd.h"

namespace lockvisor::control {

inline constexpr std::size_t kMaxClients = 8;
inline constexpr std::size_t kMaxPendingReplyBytes = 1 << 20;
inline constexpr std::chrono::seconds kIdleTimeout{60};

class ControlServer {
 public:
  ControlServer(boost::asio::io_context& io, UniqueFd listener, ControlDispatcher& dispatcher,
                std::chrono::steady_clock::duration idle_timeout = kIdleTimeout);
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  void stop();
  // Connections being served (not counting refused ones on their way out).
  std::size_t active_clients() const;

 private:
  class Session;
  void accept_next();
  void forget(const std::shared_ptr<Session>& session);

  boost::asio::io_context& io_;
  ControlDispatcher& dispatcher_;
  std::chrono::steady_clock::duration idle_timeout_;
  boost::asio::steady_timer retry_;  // a failed accept is retried after a pause
  std::optional<boost::asio::local::stream_protocol::acceptor> acceptor_;
  std::set<std::shared_ptr<Session>> sessions_;  // every open connection
  bool stopped_ = false;
};

}  // namespace lockvisor::control
