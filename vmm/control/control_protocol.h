// The control socket's protocol (docs/control-socket.md): JSON lines, one
// request object per line, one reply object per line. The dispatcher turns
// one request line into one reply; it never throws, and a bad request gets
// {"ok":false,"error":"one line"} like any other reply, so the connection
// stays usable.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "vmm/control/control_target.h"

namespace lockvisor::control {

// Bounds of the protocol, shared by the server, the client and the docs.
inline constexpr std::size_t kMaxRequestBytes = 4096;        // one request line, without its newline
inline constexpr std::uint64_t kMaxInjectUs = 10'000'000;    // one injected preemption: at most 10 s

class ControlDispatcher {
 public:
  explicit ControlDispatcher(ControlTarget& target) : target_(target) {}
  // One request line (without its newline) -> one reply object.
  nlohmann::json handle(std::string_view line);

 private:
  ControlTarget& target_;
};

// A reply object as one line of JSON (no newline): never throws, even on
// invalid UTF-8 (replaced with U+FFFD).
std::string reply_line(const nlohmann::json& reply);

// The `help` reply's command list: {cmd, args, summary} per command.
nlohmann::json command_list();

}  // namespace lockvisor::control
