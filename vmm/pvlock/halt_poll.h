// Halt polling for the userspace backend: how long a halting vCPU spins on
// its kick latch before it sleeps on the futex (--halt-poll).
//
// Polling trades host CPU time for wake-up latency: a kick that lands inside
// the window is seen within a few hundred nanoseconds instead of a futex
// wake-up and a trip through the host scheduler; a kick that lands after it
// cost the whole window in CPU for nothing. KVM polls in kvm_vcpu_halt() and
// adapts the window per vCPU; HaltPollWindow is the same policy, written from
// its description:
//
//   - every vCPU starts with a window of 0 (no polling);
//   - after each halt that actually blocked (no kick was pending), look at how
//     long it blocked in total (poll + sleep):
//       * no longer than the window: polling paid off or would have; keep it;
//       * longer than the maximum while a window is open: such waits are not
//         worth polling for; shrink (KVM's default shrink factor is 0: the
//         window closes at once; a factor f divides it, and a result below
//         the start value closes it);
//       * shorter than the maximum but longer than the window: a slightly
//         longer poll would have caught the kick; grow (the first growth opens
//         the window at the start value, 10 us in KVM; later ones multiply it
//         by the grow factor, 2), never beyond the maximum.
//   - a fixed window never changes; "off" is a fixed window of 0.
// The window only grows on evidence (wake-ups that came just after it) and
// one long block is enough to close it again, so an idle or deeply
// overcommitted vCPU does not burn its host CPU polling.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace lockvisor::pvlock {

enum class HaltPollMode { kOff, kFixed, kAdaptive };

// --halt-poll off|fixed:US|adaptive[:MAX_US] (and the older --halt-poll-us N = fixed:N).
struct HaltPollSetting {
  HaltPollMode mode = HaltPollMode::kOff;
  std::uint32_t us = 0;  // fixed: the window; adaptive: the maximum window
  // KVM's defaults for adaptive polling (virt/kvm/kvm_main.c module parameters).
  static constexpr std::uint32_t kDefaultAdaptiveMaxUs = 200;  // halt_poll_ns = 200000
  static constexpr std::uint32_t kMaxUs = 1000000;             // bound of every window (1 s)

  static HaltPollSetting off() { return {}; }
  static HaltPollSetting fixed(std::uint32_t us) { return {us ? HaltPollMode::kFixed : HaltPollMode::kOff, us}; }
  static HaltPollSetting adaptive(std::uint32_t max_us = kDefaultAdaptiveMaxUs) { return {HaltPollMode::kAdaptive, max_us}; }
  bool operator==(const HaltPollSetting&) const = default;
};

// Parses the --halt-poll value; throws lockvisor::Error (usage) with one line
// naming the option on anything else.
HaltPollSetting parse_halt_poll(std::string_view text);
// The same spelling back: "off", "fixed:50", "adaptive:200".
std::string format_halt_poll(const HaltPollSetting& setting);

// The adaptive parameters (KVM's halt_poll_ns_grow_start, _grow, _shrink).
struct HaltPollTuning {
  std::uint64_t grow_start_ns = 10000;
  unsigned grow = 2;
  unsigned shrink = 0;  // 0: a shrink closes the window
};

// One vCPU's poll window. Used only by that vCPU's thread: no locking.
class HaltPollWindow {
 public:
  explicit HaltPollWindow(HaltPollSetting setting = {}, HaltPollTuning tuning = {});

  // How long the next halt polls before it sleeps.
  std::uint64_t window_ns() const { return window_ns_; }
  std::uint64_t max_ns() const { return max_ns_; }
  // After a halt that blocked for `blocked_ns` in total (poll + sleep); not
  // after an immediate return (a kick was pending) or a stop.
  void update(std::uint64_t blocked_ns);

  // How often the window grew / shrank (for the tests and the report).
  std::uint64_t grown() const { return grown_; }
  std::uint64_t shrunk() const { return shrunk_; }

 private:
  void grow();
  void shrink();
  HaltPollMode mode_;
  HaltPollTuning tuning_;
  std::uint64_t max_ns_;
  std::uint64_t window_ns_;
  std::uint64_t grown_ = 0;
  std::uint64_t shrunk_ = 0;
};

}  // namespace lockvisor::pvlock
