#include "vmm/pvlock/halt_poll.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "vmm/util/error.h"

namespace lockvisor::pvlock {
namespace {

// Microseconds in [lo, kMaxUs], all of `text`, or nothing.
bool parse_us(std::string_view text, std::uint32_t lo, std::uint32_t& out) {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return false;
  if (value < lo || value > HaltPollSetting::kMaxUs) return false;
  out = static_cast<std::uint32_t>(value);
  return true;
}

}  // namespace

HaltPollSetting parse_halt_poll(std::string_view text) {
  const auto bad = [&text]() -> HaltPollSetting {
    fail("--halt-poll '{}': expected off, fixed:US or adaptive[:MAX_US] (US in 1..{})", text, HaltPollSetting::kMaxUs);
  };
  if (text == "off") return HaltPollSetting::off();
  if (text == "adaptive") return HaltPollSetting::adaptive();
  std::uint32_t us = 0;
  if (text.starts_with("fixed:")) return parse_us(text.substr(6), 0, us) ? HaltPollSetting::fixed(us) : bad();
  if (text.starts_with("adaptive:")) return parse_us(text.substr(9), 1, us) ? HaltPollSetting::adaptive(us) : bad();
  return bad();
}

std::string format_halt_poll(const HaltPollSetting& setting) {
  switch (setting.mode) {
    case HaltPollMode::kOff:
      return "off";
    case HaltPollMode::kFixed:
      return fmt::format("fixed:{}", setting.us);
    case HaltPollMode::kAdaptive:
      return fmt::format("adaptive:{}", setting.us);
  }
  return "off";
}

HaltPollWindow::HaltPollWindow(HaltPollSetting setting, HaltPollTuning tuning)
    : mode_(setting.mode),
      tuning_(tuning),
      max_ns_(std::uint64_t{setting.mode == HaltPollMode::kOff ? 0 : setting.us} * 1000),
      window_ns_(setting.mode == HaltPollMode::kFixed ? max_ns_ : 0) {}

void HaltPollWindow::update(std::uint64_t blocked_ns) {
  if (mode_ != HaltPollMode::kAdaptive) return;
  if (blocked_ns <= window_ns_) return;  // the kick came inside the window
  if (window_ns_ != 0 && blocked_ns > max_ns_)
    shrink();
  else if (window_ns_ < max_ns_ && blocked_ns < max_ns_)
    grow();
}

void HaltPollWindow::grow() {
  std::uint64_t next = window_ns_ * tuning_.grow;
  if (next < tuning_.grow_start_ns) next = tuning_.grow_start_ns;
  window_ns_ = std::min(next, max_ns_);
  ++grown_;
}

void HaltPollWindow::shrink() {
  std::uint64_t next = tuning_.shrink == 0 ? 0 : window_ns_ / tuning_.shrink;
  if (next < tuning_.grow_start_ns) next = 0;
  window_ns_ = next;
  ++shrunk_;
}

}  // namespace lockvisor::pvlock
