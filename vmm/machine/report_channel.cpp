#include "vmm/machine/report_channel.h"

#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "vmm/util/guest_text.h"

namespace lockvisor::machine {
namespace abi = lockvisor::abi;

namespace {

// [gpa, gpa + length) inside memory, whose first byte is GPA `base`,
// overflow-safe.
std::optional<std::span<const std::byte>> guest_range(std::span<const std::byte> memory, std::uint64_t base,
                                                      std::uint64_t gpa, std::uint64_t length) {
  if (gpa < base) return std::nullopt;
  const std::uint64_t offset = gpa - base;
  if (offset > memory.size() || length > memory.size() - offset) return std::nullopt;
  return memory.subspan(static_cast<std::size_t>(offset), static_cast<std::size_t>(length));
}

// A fixed-capacity string: never trust a terminator to be there.
std::string fixed_string(const char* chars, std::size_t capacity, unsigned* replaced) {
  bool any = false;
  std::string text = valid_utf8(std::string_view(chars, strnlen(chars, capacity)), &any);
  if (any) ++*replaced;
  return text;
}

bool known_type(std::uint32_t type) {
  return type >= static_cast<std::uint32_t>(abi::UcallType::kPrint) &&
         type <= static_cast<std::uint32_t>(abi::UcallType::kPreemptPoint);
}

std::uint64_t kept_bytes(std::uint64_t payload) { return payload + GuestLimits::kKeptItemOverhead; }

}  // namespace

std::optional<UcallMessage> decode_ucall(std::span<const std::byte> memory, std::uint64_t gpa, std::string* error,
                                         std::uint64_t memory_base) {
  const auto bytes = guest_range(memory, memory_base, gpa, sizeof(abi::Ucall));
  if (!bytes) {
    *error = fmt::format("report channel: structure at GPA {:#x} lies outside guest memory", gpa);
    return std::nullopt;
  }
  abi::Ucall raw;  // a snapshot: other vCPUs may be writing the guest's copy
  std::memcpy(&raw, bytes->data(), sizeof raw);
  if (raw.magic != abi::kUcallMagic) {
    *error = fmt::format("report channel: bad magic {:#x} at GPA {:#x}", raw.magic, gpa);
    return std::nullopt;
  }
  const auto type = static_cast<std::uint32_t>(raw.type);
  if (!known_type(type)) {
    *error = fmt::format("report channel: unknown type {}", type);
    return std::nullopt;
  }
  UcallMessage m;
  m.type = raw.type;
  std::memcpy(m.args, raw.args, sizeof m.args);
  m.text = fixed_string(raw.text, sizeof raw.text, &m.replaced_strings);
  if (m.type == abi::UcallType::kAssertFail) m.file = fixed_string(raw.file, sizeof raw.file, &m.replaced_strings);
  return m;
}

UcallAction GuestReport::error(std::string reason) { return {UcallAction::Kind::kGuestError, std::move(reason), 0}; }

UcallAction GuestReport::handle(std::span<const std::byte> memory, std::uint64_t gpa) {
  if (auto over = budget_.charge_message()) return error(std::move(*over));
  std::string why;
  const auto message = decode_ucall(memory, gpa, &why, memory_base_);
  if (!message) return error(std::move(why));
  replaced_strings_ += message->replaced_strings;
  return apply(*message, memory);
}

UcallAction GuestReport::apply(const UcallMessage& m, std::span<const std::byte> memory) {
  const auto& limits = budget_.limits();
  switch (m.type) {
    case abi::UcallType::kPrint:
      if (auto over = budget_.charge_report_bytes(kept_bytes(m.text.size()))) return error(std::move(*over));
      return {UcallAction::Kind::kPrint, m.text, 0};

    case abi::UcallType::kAssertFail:
      return {UcallAction::Kind::kAssertFailed,
              fmt::format("guest check failed at {}:{}: {}", console_escape(m.file), m.args[0], console_escape(m.text)),
              0};

    case abi::UcallType::kResult:
      if (auto over = budget_.charge_report_bytes(kept_bytes(m.text.size() + sizeof(std::uint64_t))))
        return error(std::move(*over));
      results_.push_back({m.text, {m.args[0]}, m.args[1]});
      return {};

    case abi::UcallType::kResultArray: {
      const std::uint64_t count = m.args[1];
      if (count > limits.array_values)
        return error(fmt::format("report channel: array '{}' of {} values is longer than {} values",
                                 console_escape(m.text), count, limits.array_values));
      // count <= array_values < 2^61: count * 8 cannot wrap.
      const auto bytes = guest_range(memory, memory_base_, m.args[0], count * sizeof(std::uint64_t));
      if (!bytes)
        return error(fmt::format("report channel: array '{}' ({} values at GPA {:#x}) lies outside guest memory",
                                 console_escape(m.text), count, m.args[0]));
      if (auto over = budget_.charge_report_bytes(kept_bytes(m.text.size() + bytes->size())))
        return error(std::move(*over));
      ResultValue value{m.text, std::vector<std::uint64_t>(static_cast<std::size_t>(count)), m.args[2]};
      if (!bytes->empty()) std::memcpy(value.values.data(), bytes->data(), bytes->size());
      results_.push_back(std::move(value));
      return {};
    }

    case abi::UcallType::kCaseBegin: {
      if (open_count_ >= limits.open_cases)
        return error(fmt::format("report channel: more than {} cases open at once on one vCPU (limit --max-open-cases)",
                                 limits.open_cases));
      if (auto over = budget_.charge_report_bytes(kept_bytes(m.text.size()))) return error(std::move(*over));
      cases_.push_back({m.text, false, false});
      open_[m.text].push_back(cases_.size() - 1);
      ++open_count_;
      return {};
    }

    case abi::UcallType::kCaseEnd: {
      // The innermost open case of that name; a CASE_END that matches no
      // open case changes nothing (as before), but was counted as a message.
      const auto it = open_.find(m.text);
      if (it == open_.end()) return {};
      GuestCase& c = cases_[it->second.back()];
      c.ended = true;
      c.passed = m.args[0] == 1;
      it->second.pop_back();
      if (it->second.empty()) open_.erase(it);
      --open_count_;
      return {};
    }

    case abi::UcallType::kDone:
      return {UcallAction::Kind::kDone, {}, m.args[0]};

    case abi::UcallType::kWindowMark:
      if (m.args[0] != abi::kWindowStart && m.args[0] != abi::kWindowEnd)
        return error(fmt::format("report channel: window mark edge {} (expected 0 start or 1 end)", m.args[0]));
      return {UcallAction::Kind::kWindowMark, {}, m.args[0]};

    case abi::UcallType::kPreemptPoint:
      // Checked by the injector, which knows the schedule (vmm/inject/).
      return {UcallAction::Kind::kPreemptPoint, {}, 0, {m.args[0], m.args[1], m.args[2]}};
  }
  return error(fmt::format("report channel: unknown type {}", static_cast<std::uint32_t>(m.type)));
}

}  // namespace lockvisor::machine
