// The control socket's file rules and its server over a real Unix socket,
// with a fake VM (no KVM): owner-only permissions, no path ever replaced but
// a stale socket, bounded lines and clients, clients that vanish mid-line,
// and EOF for everyone when the server stops.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>

#include "vmm/control/control_client.h"
#include "vmm/control/control_server.h"
#include "vmm/control/control_socket.h"
#include "vmm/util/error.h"
#include "vmm/util/unique_fd.h"

namespace lockvisor::control {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

class StatsOnly final : public ControlTarget {
 public:
  unsigned vcpu_count() const override { return 1; }
  json stats() const override { return {{"vcpus", json::array()}}; }
  json pause(unsigned) override { return json::object(); }
  json resume(unsigned) override { return json::object(); }
  json inject(unsigned, std::chrono::microseconds) override { return json::object(); }
  json set_kick_mode(pvlock::KickMode) override { return json::object(); }
};

std::string temp_path(const char* name) {
  return (fs::temp_directory_path() / ("lockvisor-ctl-" + std::to_string(::getpid()) + "-" + name)).string();
}

UniqueFd connect_to(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", path.c_str());
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) return UniqueFd();
  return fd;
}

void send_all(int fd, const std::string& data) {
  for (std::size_t sent = 0; sent < data.size();) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;  // the server closed: fine for the tests that flood
    sent += static_cast<std::size_t>(n);
  }
}

// One line (without newline); "" on EOF or after 5 s.
std::string read_line(int fd) {
  std::string line;
  char c = 0;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) return line;
    const ssize_t n = ::recv(fd, &c, 1, 0);
    if (n <= 0 || c == '\n') return line;
    line.push_back(c);
  }
}

// True when the peer closed: recv returns 0 (or a reset) within 5 s.
bool sees_eof(int fd) {
  char buffer[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) return false;
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) return true;
  }
}

// A ControlServer on its own io thread, as the Machine's monitor loop runs it.
class Server : public ::testing::Test {
 protected:
  void SetUp() override {
    path = temp_path("server.sock");
    fs::remove(path);
    socket.emplace(path);
    server.emplace(io, socket->take_listener(), dispatcher, idle);
    thread = std::thread([this] { io.run(); });
  }
  void TearDown() override { stop(); }
  void stop() {
    if (!thread.joinable()) return;
    std::promise<void> done;
    boost::asio::post(io, [&] {
      server->stop();
      done.set_value();
    });
    done.get_future().wait();
    work.reset();
    io.stop();
    thread.join();
    server.reset();
    socket.reset();
  }
  std::size_t active_clients() {
    std::promise<std::size_t> n;
    boost::asio::post(io, [&] { n.set_value(server->active_clients()); });
    return n.get_future().get();
  }

  std::chrono::steady_clock::duration idle = kIdleTimeout;
  std::string path;
  StatsOnly target;
  ControlDispatcher dispatcher{target};
  boost::asio::io_context io;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work{io.get_executor()};
  std::optional<ControlSocket> socket;
  std::optional<ControlServer> server;
  std::thread thread;
};

TEST(ControlSocketFile, IsOwnerOnlyAndRemoved) {
  const std::string path = temp_path("mode.sock");
  fs::remove(path);
  {
    ControlSocket socket(path);
    struct stat st {};
    ASSERT_EQ(::lstat(path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 07777, 0600u);
  }
  EXPECT_FALSE(fs::exists(fs::symlink_status(path)));
}

TEST(ControlSocketFile, NeverReplacesAFileThatIsNotASocket) {
  const std::string path = temp_path("regular");
  { std::ofstream(path) << "precious"; }
  try {
    ControlSocket socket(path);
    FAIL() << "a regular file was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage);
    EXPECT_NE(std::string(e.what()).find("not a socket"), std::string::npos) << e.what();
  }
  std::ifstream in(path);
  std::string text;
  in >> text;
  EXPECT_EQ(text, "precious");
  fs::remove(path);
}

TEST(ControlSocketFile, ReplacesAStaleSocketButNotALiveOne) {
  const std::string path = temp_path("stale.sock");
  fs::remove(path);
  {
    // A socket bound but never listening, left behind: stale.
    UniqueFd stale(::socket(AF_UNIX, SOCK_STREAM, 0));
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", path.c_str());
    ASSERT_EQ(::bind(stale.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
  }
  ControlSocket live(path);  // replaced the stale one
  EXPECT_THROW(ControlSocket second(path), Error);  // never takes over a live one
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << "the refused second socket must not remove the live one";
}

TEST_F(Server, AnswersRequestsAndKeepsTheConnectionAfterErrors) {
  UniqueFd client = connect_to(path);
  ASSERT_TRUE(client.valid());
  send_all(client.get(), "{\"cmd\":\"stats\",\"id\":1}\n");
  EXPECT_EQ(json::parse(read_line(client.get()))["id"], 1);
  send_all(client.get(), "not json\n\n{\"cmd\":\"frobnicate\",\"id\":2}\r\n");
  const json bad = json::parse(read_line(client.get()));
  EXPECT_FALSE(bad.value("ok", true));
  const json unknown = json::parse(read_line(client.get()));
  EXPECT_FALSE(unknown.value("ok", true));
  EXPECT_EQ(unknown["id"], 2);
  // Still usable, and a request split across writes is one request.
  send_all(client.get(), "{\"cmd\":");
  std::this_thread::sleep_for(20ms);
  send_all(client.get(), "\"stats\",\"id\":3}\n");
  const json again = json::parse(read_line(client.get()));
  EXPECT_TRUE(again.value("ok", false));
  EXPECT_EQ(again["id"], 3);
  // ctl's own round trip against the same server.
  EXPECT_TRUE(json::parse(round_trip(path, R"({"cmd":"help"})", 2s)).value("ok", false));
}

TEST_F(Server, ClosesAConnectionWhoseLineIsTooLong) {
  UniqueFd flood = connect_to(path);
  ASSERT_TRUE(flood.valid());
  std::thread writer([&] { send_all(flood.get(), std::string(1 << 20, 'x')); });  // 1 MiB, no newline
  const std::string line = read_line(flood.get());
  writer.join();
  if (!line.empty()) {  // the error line, unless the kernel reset the connection first
    const json reply = json::parse(line);
    EXPECT_FALSE(reply.value("ok", true));
    EXPECT_NE(reply.value("error", std::string()).find("longer than"), std::string::npos);
  }
  EXPECT_TRUE(sees_eof(flood.get()));
  // Others are served as before.
  EXPECT_TRUE(json::parse(round_trip(path, R"({"cmd":"stats"})", 2s)).value("ok", false));
}

TEST_F(Server, AClientThatVanishesMidLineHarmsNobody) {
  UniqueFd other = connect_to(path);
  {
    UniqueFd gone = connect_to(path);
    send_all(gone.get(), "{\"cmd\":\"pau");
  }
  UniqueFd never_reads = connect_to(path);
  for (int i = 0; i < 200; ++i) send_all(never_reads.get(), "{\"cmd\":\"help\"}\n");  // its replies pile up, bounded
  send_all(other.get(), "{\"cmd\":\"stats\",\"id\":9}\n");
  EXPECT_EQ(json::parse(read_line(other.get()))["id"], 9);
}

TEST_F(Server, BoundsTheNumberOfClients) {
  std::vector<UniqueFd> clients;
  for (std::size_t i = 0; i < kMaxClients; ++i) {
    clients.push_back(connect_to(path));
    send_all(clients.back().get(), "{\"cmd\":\"stats\"}\n");
    ASSERT_FALSE(read_line(clients.back().get()).empty());  // accepted and answered
  }
  EXPECT_EQ(active_clients(), kMaxClients);
  UniqueFd one_more = connect_to(path);
  ASSERT_TRUE(one_more.valid());
  const json refused = json::parse(read_line(one_more.get()));
  EXPECT_NE(refused.value("error", std::string()).find("too many clients"), std::string::npos);
  EXPECT_TRUE(sees_eof(one_more.get()));
  clients.pop_back();  // one leaves: room for another
  for (int i = 0; i < 100 && active_clients() >= kMaxClients; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(json::parse(round_trip(path, R"({"cmd":"stats"})", 2s)).value("ok", false));
}

// The idle bound with a short timeout: a silent client is told and closed
// (its slot freed); one that keeps asking stays.
class ShortIdleServer : public Server {
 protected:
  void SetUp() override {
    idle = 300ms;
    Server::SetUp();
  }
};

TEST_F(ShortIdleServer, ClosesASilentClientAndKeepsABusyOne) {
  UniqueFd silent = connect_to(path);
  UniqueFd busy = connect_to(path);
  ASSERT_TRUE(silent.valid() && busy.valid());
  for (int i = 0; i < 8; ++i) {  // 8 x 100 ms: well past the timeout
    send_all(busy.get(), "{\"cmd\":\"stats\"}\n");
    ASSERT_TRUE(json::parse(read_line(busy.get())).value("ok", false));
    std::this_thread::sleep_for(100ms);
  }
  const json closing = json::parse(read_line(silent.get()));
  EXPECT_NE(closing.value("error", std::string()).find("no request for 0.3 s"), std::string::npos) << closing;
  EXPECT_TRUE(sees_eof(silent.get()));
  EXPECT_EQ(active_clients(), 1u);
  send_all(busy.get(), "{\"cmd\":\"stats\"}\n");
  EXPECT_TRUE(json::parse(read_line(busy.get())).value("ok", false)) << "the busy client is still served";
}

TEST_F(Server, StopGivesEveryClientEofAndRemovesTheSocket) {
  UniqueFd idle = connect_to(path);
  UniqueFd mid_line = connect_to(path);
  send_all(mid_line.get(), "{\"cmd\"");
  send_all(idle.get(), "{\"cmd\":\"stats\"}\n");
  ASSERT_FALSE(read_line(idle.get()).empty());
  stop();
  EXPECT_TRUE(sees_eof(idle.get()));
  EXPECT_TRUE(sees_eof(mid_line.get()));
  EXPECT_FALSE(fs::exists(fs::symlink_status(path)));
  try {
    round_trip(path, R"({"cmd":"stats"})", 1s);
    FAIL() << "connected after stop";
  } catch (const CtlError& e) {
    EXPECT_EQ(e.code(), CtlExit::kCannotConnect);
  }
}

// A path that exists but is no socket (a regular file, a device) is said to
// be no socket, not a run that has ended ("nothing listens").
TEST(ControlClient, APathThatIsNoSocketIsSaidToBeNone) {
  for (const char* path : {"/dev/null", "/proc/self/status"}) {
    try {
      round_trip(path, R"({"cmd":"stats"})", 1s);
      FAIL() << "connected to " << path;
    } catch (const CtlError& e) {
      EXPECT_EQ(e.code(), CtlExit::kCannotConnect);
      EXPECT_NE(std::string(e.what()).find("(not a socket: give the SOCK of run --api SOCK)"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace lockvisor::control
