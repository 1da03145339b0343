// libFuzzer target for the report-channel decoder (vmm/machine/report_channel.h):
// the input is guest memory AND the script of Ucall addresses a guest rings
// with, under small, input-chosen limits. Built with clang only
// (-DLOCKVISOR_FUZZ=ON, see tests/hostile/CMakeLists.txt); tools/test.sh runs
// it for a bounded time under ASan + UBSan.
//
// Input layout (little endian):
//   [0..1] report-byte limit / 16, [2] message limit, [3] open-case limit,
//   [4] number of messages (mod 64), [5] flags: bit 0 stamps the Ucall magic
//   at each address before it is rung, bit 1 folds its type into 0..7 (so
//   that the fuzzer spends its time past the magic and type checks), [6..7]
//   unused, then one u32 per message: the Ucall's GPA (bit 31 set: ~0 - low
//   bits, to reach the wrap-around paths). The whole input, stamps applied,
//   is also the guest memory.
// Invariants checked after every message (a violation traps):
//   - the budget never exceeds a limit, and open cases never exceed theirs;
//   - every kept string is valid UTF-8 of bounded length and survives
//     nlohmann::json::dump();
//   - every reason line is one line with no control character.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vmm/machine/guest_limits.h"
#include "vmm/util/guest_text.h"
#include "vmm/machine/report_channel.h"

namespace {
using namespace lockvisor;
using machine::UcallAction;

void check(bool condition) {
  if (!condition) __builtin_trap();
}

bool console_safe(const std::string& text) {
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F) return false;
  }
  return lockvisor::valid_utf8(text) == text;
}

bool json_safe(const std::string& text) {
  try {
    (void)nlohmann::json(text).dump();
    return lockvisor::valid_utf8(text) == text;
  } catch (...) {
    return false;
  }
}

std::uint32_t u32_at(const std::uint8_t* data, std::size_t size, std::size_t offset) {
  std::uint32_t value = 0;
  if (offset + sizeof value <= size) std::memcpy(&value, data + offset, sizeof value);
  return value;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 8) return 0;
  machine::GuestLimits limits;
  limits.report_bytes = (std::uint64_t{data[0]} | std::uint64_t{data[1]} << 8) * 16;
  limits.report_messages = 1 + data[2];
  limits.open_cases = data[3] % 16;
  const unsigned messages = data[4] % 64;
  const bool stamp_magic = (data[5] & 1) != 0, fold_type = (data[5] & 2) != 0;
  machine::GuestBudget budget(limits);
  machine::GuestReport report(budget);
  std::vector<std::byte> guest(reinterpret_cast<const std::byte*>(data), reinterpret_cast<const std::byte*>(data) + size);
  const std::span<const std::byte> memory(guest);

  for (unsigned i = 0; i < messages; ++i) {
    const std::uint32_t raw = u32_at(data, size, 8 + 4 * std::size_t{i});
    const std::uint64_t gpa = (raw & 0x8000'0000u) ? ~std::uint64_t{0} - (raw & 0x7FFF'FFFFu) : raw % (size + 64);
    if (gpa < size && size - gpa >= 8) {
      if (stamp_magic) std::memcpy(guest.data() + gpa, &abi::kUcallMagic, sizeof abi::kUcallMagic);
      if (fold_type) guest[gpa + 4] = static_cast<std::byte>(static_cast<unsigned>(guest[gpa + 4]) % 10);  // every UcallType, kPreemptPoint (9) too
      if (fold_type) std::memset(guest.data() + gpa + 5, 0, 3);
    }
    const UcallAction action = report.handle(memory, gpa);

    check(budget.report_bytes() <= limits.report_bytes);
    check(report.open_cases() <= limits.open_cases);
    switch (action.kind) {
      case UcallAction::Kind::kPrint:
        check(action.text.size() <= 3 * abi::kUcallTextBytes);  // U+FFFD is 3 bytes for 1
        check(json_safe(action.text));
        check(console_safe(lockvisor::console_escape(action.text)));
        break;
      case UcallAction::Kind::kAssertFailed:
      case UcallAction::Kind::kGuestError:
        check(console_safe(action.text));
        check(json_safe(action.text));
        break;
      case UcallAction::Kind::kWindowMark:  // only the two edges get through
        check(action.exit_code == abi::kWindowStart || action.exit_code == abi::kWindowEnd);
        break;
      case UcallAction::Kind::kPreemptPoint:  // checked by the injector (vmm/inject/), not here
      case UcallAction::Kind::kContinue:
      case UcallAction::Kind::kDone:
        break;
    }
    if (action.kind == UcallAction::Kind::kGuestError || action.kind == UcallAction::Kind::kDone ||
        action.kind == UcallAction::Kind::kAssertFailed)
      break;  // the VMM stops this vCPU here
  }
  check(budget.messages() <= limits.report_messages + 1);
  std::uint64_t kept = 0;
  for (const auto& r : report.results()) {
    check(json_safe(r.key));
    check(r.key.size() <= 3 * abi::kUcallTextBytes);
    check(r.values.size() <= limits.array_values);
    kept += r.key.size() + r.values.size() * sizeof(std::uint64_t) + machine::GuestLimits::kKeptItemOverhead;
  }
  for (const auto& c : report.cases()) {
    check(json_safe(c.name));
    kept += c.name.size() + machine::GuestLimits::kKeptItemOverhead;
  }
  check(kept <= budget.report_bytes());
  return 0;
}
