#include "vmm/control/control_protocol.h"

#include <fmt/format.h>

#include <array>
#include <optional>
#include <vector>

#include "vmm/util/guest_text.h"

namespace lockvisor::control {
namespace {

using nlohmann::json;

// The argument fields a command takes, each with its JSON key.
enum class Arg { kVcpu, kMicros, kMode };
const char* arg_key(Arg arg) {
  switch (arg) {
    case Arg::kVcpu: return "vcpu";
    case Arg::kMicros: return "us";
    case Arg::kMode: return "mode";
  }
  return "?";
}

struct CommandSpec {
  std::string_view name;
  std::vector<Arg> args;
  const char* summary;
};

const std::array<CommandSpec, 6>& commands() {
  static const std::array<CommandSpec, 6> kCommands = {{
      {"stats", {}, "elapsed time, outcome so far; per vCPU: state, exits by kind, PV counters, injected preemptions"},
      {"pause", {Arg::kVcpu}, "hold vCPU `vcpu` out of the guest (as if descheduled) until resume"},
      {"resume", {Arg::kVcpu}, "let a paused vCPU run again"},
      {"inject", {Arg::kVcpu, Arg::kMicros}, "deschedule vCPU `vcpu` for `us` microseconds (1..10^7), now"},
      {"kick-mode", {Arg::kMode}, "switch the --kick mode of the running VM: sticky or lossy"},
      {"help", {}, "this list"},
  }};
  return kCommands;
}

const CommandSpec* find_command(std::string_view name) {
  for (const auto& c : commands())
    if (c.name == name) return &c;
  return nullptr;
}

std::string command_names() {
  std::string names;
  for (const auto& c : commands()) names += fmt::format("{}{}", names.empty() ? "" : ", ", c.name);
  return names;
}

std::string allowed_fields(const CommandSpec& spec) {
  std::string fields = "id, cmd";
  for (Arg a : spec.args) fields += fmt::format(", {}", arg_key(a));
  return fields;
}

// Text from the request shown in an error: short, and never more than one line.
std::string excerpt(std::string_view text) {
  constexpr std::size_t kMax = 40;
  std::string shown = lockvisor::console_escape(std::string(text.substr(0, kMax)));
  return fmt::format("'{}'{}", shown, text.size() > kMax ? "..." : "");
}

std::uint64_t unsigned_field(const json& request, const char* key, std::uint64_t min, std::uint64_t max,
                             const char* what) {
  const json& value = request.at(key);
  // A JSON number with a fraction or a sign is not an index or a count.
  if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<std::int64_t>() >= 0))
    throw RequestError(fmt::format("field '{}' must be {} (an integer from {} to {})", key, what, min, max));
  const auto n = value.get<std::uint64_t>();
  if (n < min || n > max)
    throw RequestError(fmt::format("field '{}' must be {} (an integer from {} to {}), not {}", key, what, min, max, n));
  return n;
}

unsigned vcpu_field(const json& request, unsigned vcpu_count) {
  const json& value = request.at("vcpu");
  if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<std::int64_t>() >= 0))
    throw RequestError("field 'vcpu' must be a vCPU index (a non-negative integer)");
  const auto n = value.get<std::uint64_t>();
  if (n >= vcpu_count)
    throw RequestError(fmt::format("vCPU {} does not exist (this VM has vCPUs 0-{})", n, vcpu_count - 1));
  return static_cast<unsigned>(n);
}

pvlock::KickMode mode_field(const json& request) {
  const json& value = request.at("mode");
  const auto mode = value.is_string() ? pvlock::parse_kick_mode(value.get_ref<const std::string&>()) : std::nullopt;
  if (!mode)
    throw RequestError(fmt::format("field 'mode' must be sticky or lossy{}",
                                   value.is_string() ? ", not " + excerpt(value.get_ref<const std::string&>()) : ""));
  return *mode;
}

json dispatch(ControlTarget& target, const json& request) {
  if (!request.is_object()) throw RequestError("a request must be a JSON object, e.g. {\"cmd\":\"stats\"}");
  const auto cmd = request.find("cmd");
  if (cmd == request.end()) throw RequestError("missing field 'cmd'");
  if (!cmd->is_string()) throw RequestError("field 'cmd' must be a string");
  const std::string& name = cmd->get_ref<const std::string&>();
  const CommandSpec* spec = find_command(name);
  if (spec == nullptr) throw RequestError(fmt::format("unknown command {} (commands: {})", excerpt(name), command_names()));
  // Strict fields: a misspelt argument ("vpcu") is an error, not a default.
  for (const auto& [key, value] : request.items()) {
    if (key == "id" || key == "cmd") continue;
    bool known = false;
    for (Arg a : spec->args) known = known || key == arg_key(a);
    if (!known)
      throw RequestError(fmt::format("unknown field {} for {} (fields: {})", excerpt(key), spec->name, allowed_fields(*spec)));
  }
  for (Arg a : spec->args)
    if (!request.contains(arg_key(a)))
      throw RequestError(fmt::format("missing field '{}' ({} needs: {})", arg_key(a), spec->name, allowed_fields(*spec)));

  if (name == "stats") return target.stats();
  if (name == "help") return {{"commands", command_list()}};
  if (name == "kick-mode") return target.set_kick_mode(mode_field(request));
  const unsigned vcpu = vcpu_field(request, target.vcpu_count());
  if (name == "pause") return target.pause(vcpu);
  if (name == "resume") return target.resume(vcpu);
  // inject
  const auto us = unsigned_field(request, "us", 1, kMaxInjectUs, "a preemption length in microseconds");
  return target.inject(vcpu, std::chrono::microseconds(us));
}

}  // namespace

json command_list() {
  json list = json::array();
  for (const auto& c : commands()) {
    json args = json::array();
    for (Arg a : c.args) args.push_back(arg_key(a));
    list.push_back({{"cmd", c.name}, {"args", args}, {"summary", c.summary}});
  }
  return list;
}

json ControlDispatcher::handle(std::string_view line) {
  json reply;
  std::optional<json> id;
  try {
    if (line.size() > kMaxRequestBytes)
      throw RequestError(fmt::format("request longer than {} bytes", kMaxRequestBytes));
    // No exceptions from the parser: its messages quote the input, which may
    // not be valid UTF-8 (and would then make the reply unprintable).
    json request = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    if (request.is_discarded()) throw RequestError("the request is not valid JSON");
    if (request.is_object())
      if (auto it = request.find("id"); it != request.end()) id = *it;
    reply = dispatch(target_, request);
    if (!reply.is_object()) reply = json::object();
    reply["ok"] = true;
  } catch (const RequestError& e) {
    reply = {{"ok", false}, {"error", e.what()}};
  } catch (const std::exception& e) {  // a json type error or an allocation failure: still one reply
    reply = {{"ok", false}, {"error", fmt::format("internal error: {}", e.what())}};
  }
  if (id) reply["id"] = std::move(*id);
  return reply;
}

std::string reply_line(const nlohmann::json& reply) {
  try {
    return reply.dump(-1, ' ', false, json::error_handler_t::replace);
  } catch (const std::exception&) {
    return R"({"ok":false,"error":"internal error: the reply could not be encoded"})";
  }
}

}  // namespace lockvisor::control
