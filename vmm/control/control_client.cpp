#include "vmm/control/control_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "vmm/control/control_protocol.h"
#include "vmm/util/unique_fd.h"

namespace lockvisor::control {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

[[noreturn]] void usage(const std::string& what) { throw CtlError(CtlExit::kUsage, what); }

unsigned parse_vcpu(const std::string& text) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos)
    usage(fmt::format("'{}' is not a vCPU index", text));
  return static_cast<unsigned>(std::stoul(text));
}

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

// Waits for `events` on `fd` until `deadline`; false on timeout.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, remaining_ms(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return false;
  }
}

std::string ms(std::uint64_t ns) { return fmt::format("{:.1f}", static_cast<double>(ns) / 1e6); }

std::uint64_t count_of(const json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer() || (!it->is_number_unsigned() && it->get<std::int64_t>() < 0))
    return 0;
  return it->get<std::uint64_t>();
}

std::string format_stats(const json& reply) {
  std::string out = fmt::format("elapsed {:.3f} s, {}, backend {}, kick {}\n", reply.value("elapsed_s", 0.0),
                                reply.value("outcome", std::string("?")), reply.value("backend", std::string("?")),
                                reply.value("kick_mode", std::string("?")));
  if (reply.contains("reason")) out += fmt::format("reason: {}\n", reply.value("reason", std::string()));
  out += fmt::format("{:>4}  {:<8} {:>8} {:>10} {:>9} {:>9} {:>8} {:>9} {:>9} {:>9} {:>8} {:>9} {:>6} {:>9}\n", "vCPU",
                     "state", "cpu_s", "exits", "hlt", "hypercall", "signal", "halts", "kicks_out", "kicks_in", "dropped",
                     "injected", "inj_ms", "pauses");
  for (const auto& v : reply.value("vcpus", json::array())) {
    const json exits = v.value("exits", json::object());
    const json pv = v.value("pv", json::object());
    const json park = v.value("injected_preemptions", json::object());
    const auto cpu = v.find("cpu_s");
    const std::string cpu_text = cpu != v.end() && cpu->is_number() ? fmt::format("{:.3f}", cpu->get<double>()) : "-";
    out += fmt::format("{:>4}  {:<8} {:>8} {:>10} {:>9} {:>9} {:>8} {:>9} {:>9} {:>9} {:>8} {:>9} {:>6} {:>9}\n",
                       count_of(v, "vcpu"), v.value("state", std::string("?")), cpu_text, count_of(v, "exits_total"),
                       count_of(exits, "hlt"), count_of(exits, "hypercall"), count_of(exits, "signal"),
                       count_of(pv, "halts"), count_of(pv, "kicks_sent"), count_of(pv, "kicks_received"),
                       count_of(pv, "kicks_dropped"), count_of(park, "count"), ms(count_of(park, "ns")),
                       count_of(park, "pauses"));
  }
  return out;
}

}  // namespace

std::uint64_t parse_preemption_us(const std::string& text) {
  std::size_t digits = 0;
  while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.'))
    ++digits;
  const std::string number = text.substr(0, digits);
  const std::string unit = text.substr(digits);
  double scale = 0;
  if (unit.empty() || unit == "us") scale = 1;
  else if (unit == "ms") scale = 1e3;
  else if (unit == "s") scale = 1e6;
  if (number.empty() || scale == 0 || std::count(number.begin(), number.end(), '.') > 1)
    usage(fmt::format("'{}' is not a preemption length (e.g. 20ms, 500us, 0.5s; a bare number is microseconds)", text));
  const double us = std::stod(number) * scale;
  if (!(us >= 1) || us > static_cast<double>(kMaxInjectUs))
    usage(fmt::format("'{}': a preemption lasts from 1 us to {} s", text, kMaxInjectUs / 1000000));
  return static_cast<std::uint64_t>(std::llround(us));
}

std::string build_request(const std::string& command, const std::vector<std::string>& args) {
  const auto want = [&](std::size_t n, const char* form) {
    if (args.size() != n) usage(fmt::format("usage: lockvisor ctl SOCK {}", form));
  };
  json request;
  if (command == "stats" || command == "help") {
    want(0, command.c_str());
    request = {{"cmd", command}};
  } else if (command == "pause" || command == "resume") {
    want(1, (command + " VCPU").c_str());
    request = {{"cmd", command}, {"vcpu", parse_vcpu(args[0])}};
  } else if (command == "inject") {
    want(2, "inject VCPU LENGTH (e.g. inject 1 20ms)");
    request = {{"cmd", "inject"}, {"vcpu", parse_vcpu(args[0])}, {"us", parse_preemption_us(args[1])}};
  } else if (command == "kick-mode") {
    want(1, "kick-mode sticky|lossy");
    request = {{"cmd", "kick-mode"}, {"mode", args[0]}};
  } else if (command == "raw") {
    want(1, "raw 'JSON-REQUEST'");
    if (args[0].find('\n') != std::string::npos) usage("raw: the request must be one line");
    if (args[0].size() > kMaxRequestBytes) usage(fmt::format("raw: the request is longer than {} bytes", kMaxRequestBytes));
    return args[0];
  } else {
    usage(fmt::format("unknown command '{}' (commands: stats, pause, resume, inject, kick-mode, help, raw)", command));
  }
  return reply_line(request);
}

std::string round_trip(const std::string& path, const std::string& line, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(address.sun_path))
    throw CtlError(CtlExit::kCannotConnect, fmt::format("{}: not a usable socket path", path));
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) throw CtlError(CtlExit::kCannotConnect, fmt::format("socket: {}", std::strerror(errno)));
  // A full backlog (the VM's loop is busy) answers EAGAIN: retry until the deadline.
  for (;;) {
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0) break;
    const int error = errno;
    if ((error == EAGAIN || error == EINTR) && remaining_ms(deadline) > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    // connect() says "refused" for a path that is no socket at all (a regular
    // file, /dev/null): that is a wrong path, not a run that has ended.
    struct stat st {};
    const bool not_a_socket = ::stat(path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode);
    const char* hint = not_a_socket            ? " (not a socket: give the SOCK of run --api SOCK)"
                       : error == ENOENT       ? " (no such socket: is the run started with --api?)"
                       : error == ECONNREFUSED ? " (nothing listens: the run has ended?)"
                                               : "";
    throw CtlError(CtlExit::kCannotConnect, fmt::format("cannot connect to {}: {}{}", path, std::strerror(error), hint));
  }
  const std::string request = line + "\n";
  for (std::size_t sent = 0; sent < request.size();) {
    const ssize_t n = ::send(fd.get(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!wait_for(fd.get(), POLLOUT, deadline))
        throw CtlError(CtlExit::kNoReply, fmt::format("{}: the request could not be sent within {} ms", path, timeout.count()));
    } else {
      throw CtlError(CtlExit::kNoReply, fmt::format("{}: sending the request: {}", path, std::strerror(errno)));
    }
  }
  std::string reply;
  constexpr std::size_t kMaxReplyBytes = 16u << 20;
  for (;;) {
    if (const auto newline = reply.find('\n'); newline != std::string::npos) return reply.substr(0, newline);
    if (reply.size() > kMaxReplyBytes) throw CtlError(CtlExit::kNoReply, fmt::format("{}: reply too long", path));
    char buffer[4096];
    const ssize_t n = ::recv(fd.get(), buffer, sizeof(buffer), 0);
    if (n > 0) {
      reply.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0) {
      throw CtlError(CtlExit::kNoReply, fmt::format("{}: the connection closed before a reply (the run ended?)", path));
    } else if (errno == EAGAIN || errno == EINTR) {
      if (!wait_for(fd.get(), POLLIN, deadline))
        throw CtlError(CtlExit::kNoReply, fmt::format("{}: no reply within {} ms", path, timeout.count()));
    } else {
      throw CtlError(CtlExit::kNoReply, fmt::format("{}: reading the reply: {}", path, std::strerror(errno)));
    }
  }
}

std::string format_reply(const std::string& command, const json& reply) {
  if (command == "stats") return format_stats(reply);
  if (command == "pause")
    return fmt::format("vCPU {} paused{}\n", count_of(reply, "vcpu"), reply.value("was_paused", false) ? " (already)" : "");
  if (command == "resume")
    return fmt::format("vCPU {} {}\n", count_of(reply, "vcpu"), reply.value("was_paused", false) ? "resumed" : "was not paused");
  if (command == "inject")
    return fmt::format("vCPU {}: preemption of {} us injected\n", count_of(reply, "vcpu"), count_of(reply, "us"));
  if (command == "kick-mode")
    return fmt::format("kick mode {} -> {} at {:.3f} s{}\n", reply.value("from", std::string("?")),
                       reply.value("to", std::string("?")), reply.value("at_s", 0.0),
                       reply.value("changed", false) ? "" : " (unchanged)");
  if (command == "help") {
    std::string out;
    for (const auto& c : reply.value("commands", json::array())) {
      std::string args;
      for (const auto& a : c.value("args", json::array())) args += " " + a.get<std::string>();
      out += fmt::format("  {:<20} {}\n", c.value("cmd", std::string()) + args, c.value("summary", std::string()));
    }
    return out;
  }
  return reply_line(reply) + "\n";  // raw
}

}  // namespace lockvisor::control
