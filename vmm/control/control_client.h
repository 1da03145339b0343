// `lockvisor ctl`: the control socket's client. Builds one request from the
// command line, sends it, waits (bounded) for the one reply line, and shows
// it as text or JSON. Everything but the socket round trip is a pure
// function, tested without a VM (tests/control/).
#pragma once
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lockvisor::control {

// `lockvisor ctl` exit codes (docs/control-socket.md).
enum class CtlExit : int {
  kOk = 0,
  kUsage = 2,          // bad command line
  kCannotConnect = 3,  // no socket, nothing listening, connect timed out, not a socket
  kErrorReply = 4,     // the VM answered {"ok":false,...}
  kNoReply = 5,        // no reply within the timeout, connection closed first, or a reply that is not JSON
};

class CtlError : public std::runtime_error {
 public:
  CtlError(CtlExit code, const std::string& what) : std::runtime_error(what), code_(code) {}
  CtlExit code() const { return code_; }

 private:
  CtlExit code_;
};

// "20ms", "1.5ms", "500us", "500" (microseconds), "2s" -> microseconds.
// Throws CtlError(kUsage) for anything else, or a length outside 1 us..10 s.
std::uint64_t parse_preemption_us(const std::string& text);

// The request line for `ctl SOCK COMMAND ARGS...` (raw: ARGS[0] verbatim,
// after checking it is one line). Throws CtlError(kUsage).
std::string build_request(const std::string& command, const std::vector<std::string>& args);

// Connects to `path`, sends `line` and a newline, returns the reply line
// (without its newline). Every wait is bounded by `timeout`. Throws CtlError
// (kCannotConnect, kNoReply).
std::string round_trip(const std::string& path, const std::string& line, std::chrono::milliseconds timeout);

// The reply as people read it (stats: a per-vCPU table). `reply` is ok.
std::string format_reply(const std::string& command, const nlohmann::json& reply);

}  // namespace lockvisor::control
