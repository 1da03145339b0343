#include "vmm/control/control_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <boost/asio/write.hpp>
#include <cstring>
#include <deque>
#include <string>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace lockvisor::control {

namespace asio = boost::asio;
using Socket = asio::local::stream_protocol::socket;

// One connection. Handlers hold a shared_ptr to it, so it lives until the
// last of them has run (or the io_context is destroyed with them pending);
// the server holds one too until the connection closes.
class ControlServer::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(ControlServer& server, Socket socket)
      : server_(&server), socket_(std::move(socket)), idle_(server.io_), idle_timeout_(server.idle_timeout_) {}

  void start() {
    arm_idle();
    read_more();
  }
  // Sends one error line, then closes: a client over a bound.
  void refuse(const std::string& why) {
    refused_ = true;
    stop_reading_ = true;
    send(reply_line({{"ok", false}, {"error", why}}), /*then_close=*/true);
  }
  bool refused() const { return refused_; }
  // The server is stopping (no handler will run again): close now.
  void shut() {
    server_ = nullptr;
    close();
  }

 private:
  void read_more() {
    if (stop_reading_ || closed_) return;
    socket_.async_read_some(asio::buffer(chunk_), [self = shared_from_this()](const boost::system::error_code& ec,
                                                                              std::size_t n) { self->on_read(ec, n); });
  }

  void on_read(const boost::system::error_code& ec, std::size_t n) {
    if (closed_) return;
    if (ec) {  // EOF (perhaps mid-line: that line is dropped), reset, or cancelled
      close();
      return;
    }
    std::string_view data(chunk_.data(), n);
    while (!data.empty() && !stop_reading_) {
      const std::size_t newline = data.find('\n');
      const std::string_view piece = data.substr(0, newline);
      if (line_.size() + piece.size() > kMaxRequestBytes) {
        line_.clear();
        refuse(fmt::format("request line longer than {} bytes; closing the connection", kMaxRequestBytes));
        return;
      }
      line_.append(piece);
      if (newline == std::string_view::npos) break;
      data.remove_prefix(newline + 1);
      arm_idle();  // a whole request line: the client is alive
      answer(std::exchange(line_, std::string()));
      if (pending_bytes_ > kMaxPendingReplyBytes) {  // the client sends but does not read
        spdlog::debug("control socket: a client left {} bytes of replies unread; closing it", pending_bytes_);
        close();
        return;
      }
    }
    read_more();
  }

  // (Re)starts the idle clock; when it runs out the client is told why and
  // closed. A refused session is on its way out already.
  void arm_idle() {
    if (closed_ || refused_) return;
    idle_.expires_after(idle_timeout_);
    idle_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (ec || self->closed_ || self->refused_) return;  // cancelled: re-armed or closed
      if (self->writing_) {  // it does not even read its replies: nothing more to say
        self->close();
        return;
      }
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(self->idle_timeout_).count();
      self->refuse(fmt::format("no request for {:.1f} s; closing the connection", static_cast<double>(ms) / 1e3));
    });
  }

  void answer(std::string line) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) return;  // blank lines are not requests
    if (server_ == nullptr) return;
    send(reply_line(server_->dispatcher_.handle(line)), false);
  }

  void send(std::string reply, bool then_close) {
    close_after_write_ = close_after_write_ || then_close;
    reply.push_back('\n');
    pending_bytes_ += reply.size();
    out_.push_back(std::move(reply));
    if (!writing_) write_next();
  }

  void write_next() {
    if (closed_) return;
    if (out_.empty()) {
      writing_ = false;
      if (close_after_write_) close();
      return;
    }
    writing_ = true;
    asio::async_write(socket_, asio::buffer(out_.front()),
                      [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
                        if (self->closed_) return;
                        self->pending_bytes_ -= self->out_.front().size();
                        self->out_.pop_front();
                        if (ec) {
                          self->close();
                          return;
                        }
                        self->write_next();
                      });
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    idle_.cancel();
    boost::system::error_code ignored;
    socket_.shutdown(Socket::shutdown_both, ignored);
    socket_.close(ignored);
    out_.clear();
    pending_bytes_ = 0;
    if (server_ != nullptr) server_->forget(shared_from_this());
  }

  ControlServer* server_;  // null once the server stopped
  Socket socket_;
  asio::steady_timer idle_;  // closes a client that sends nothing for idle_timeout_
  std::chrono::steady_clock::duration idle_timeout_;
  std::array<char, 4096> chunk_{};
  std::string line_;                // the request line read so far (at most kMaxRequestBytes)
  std::deque<std::string> out_;     // replies not yet written, front first
  std::size_t pending_bytes_ = 0;
  bool writing_ = false;
  bool stop_reading_ = false;
  bool refused_ = false;  // refused at accept or over a bound: no longer a client that counts
  bool close_after_write_ = false;
  bool closed_ = false;
};

ControlServer::ControlServer(asio::io_context& io, UniqueFd listener, ControlDispatcher& dispatcher,
                             std::chrono::steady_clock::duration idle_timeout)
    : io_(io), dispatcher_(dispatcher), idle_timeout_(idle_timeout), retry_(io) {
  acceptor_.emplace(io_, asio::local::stream_protocol(), listener.get());
  (void)listener.release();  // the acceptor owns it now
  accept_next();
}

ControlServer::~ControlServer() { stop(); }

namespace {
// The peer runs as our user or as root (SO_PEERCRED, taken at connect).
bool trusted_peer(int fd) {
  ucred peer{};
  socklen_t size = sizeof(peer);
  return ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) == 0 && (peer.uid == ::geteuid() || peer.uid == 0);
}
}  // namespace

void ControlServer::accept_next() {
  if (stopped_) return;
  acceptor_->async_accept([this](const boost::system::error_code& ec, Socket socket) {
    if (stopped_) return;
    if (ec) {
      // Out of descriptors and the like: that client is refused, the run
      // goes on, and the next connection is accepted.
      // Retried after a pause: an error such as EMFILE persists, and an
      // immediate retry would spin the monitor loop.
      spdlog::debug("control socket: accept: {}", ec.message());
      if (ec == asio::error::operation_aborted) return;
      retry_.expires_after(std::chrono::milliseconds(100));
      retry_.async_wait([this](const boost::system::error_code& wait_error) {
        if (!wait_error) accept_next();
      });
      return;
    }
    const bool trusted = trusted_peer(socket.native_handle());
    auto session = std::make_shared<Session>(*this, std::move(socket));
    sessions_.insert(session);
    if (!trusted)
      session->refuse("refused: the peer runs as another user");
    else if (active_clients() > kMaxClients)
      session->refuse(fmt::format("too many clients (at most {} at once); try again later", kMaxClients));
    else
      session->start();
    accept_next();
  });
}

std::size_t ControlServer::active_clients() const {
  std::size_t n = 0;
  for (const auto& s : sessions_) n += s->refused() ? 0 : 1;
  return n;
}

void ControlServer::forget(const std::shared_ptr<Session>& session) { sessions_.erase(session); }

void ControlServer::stop() {
  if (stopped_) return;
  stopped_ = true;
  boost::system::error_code ignored;
  retry_.cancel();
  if (acceptor_) acceptor_->close(ignored);
  acceptor_.reset();
  auto sessions = std::move(sessions_);
  sessions_.clear();
  for (const auto& s : sessions) s->shut();
}

}  // namespace lockvisor::control
