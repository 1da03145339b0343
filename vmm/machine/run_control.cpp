#include "vmm/machine/run_control.h"

namespace lockvisor::machine {

RunControl::RunControl(const MachineConfig& config, pvlock::PvBackend& backend, SerialConsole& serial,
                       std::chrono::steady_clock::time_point origin)
    : config_(config), backend_(backend), serial_(serial), budget_(config.limits), origin_(origin) {}

GuestUsage RunControl::usage() const {
  return {budget_.messages(), budget_.report_bytes(), budget_.serial_bytes()};
}

void RunControl::end(Outcome outcome, std::string reason, std::vector<std::string> details) {
  {
    std::lock_guard lock(mutex_);
    if (decided_) return;
    decided_ = true;
    outcome_ = outcome;
    reason_ = std::move(reason);
    details_ = std::move(details);
  }
  stopping_.store(true);
  if (stop_hook_) stop_hook_();
}

Outcome RunControl::outcome() const {
  std::lock_guard lock(mutex_);
  return outcome_;
}
std::string RunControl::reason() const {
  std::lock_guard lock(mutex_);
  return reason_;
}
std::vector<std::string> RunControl::details() const {
  std::lock_guard lock(mutex_);
  return details_;
}
bool RunControl::decided() const {
  std::lock_guard lock(mutex_);
  return decided_;
}
void RunControl::set_guest_status(std::uint64_t status) {
  std::lock_guard lock(mutex_);
  if (!guest_status_) guest_status_ = status;
}
std::optional<std::uint64_t> RunControl::guest_status() const {
  std::lock_guard lock(mutex_);
  return guest_status_;
}

namespace {
double seconds_since(std::chrono::steady_clock::time_point origin) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin).count();
}
void note_first(std::atomic<double>& slot, std::chrono::steady_clock::time_point origin) {
  if (slot.load(std::memory_order_relaxed) != 0) return;
  double expected = 0;
  slot.compare_exchange_strong(expected, seconds_since(origin));
}
}  // namespace

void RunControl::note_entry() { note_first(first_entry_s_, origin_); }
void RunControl::note_exit() { note_first(first_exit_s_, origin_); }

int RunControl::apic_to_index(std::uint64_t apic_id) const {
  return apic_id < apic_map_.size() ? apic_map_[apic_id] : -1;
}
void RunControl::map_apic(unsigned apic_id, unsigned index) { apic_map_.at(apic_id) = static_cast<int>(index); }

void RunControl::add_print(std::string line) {
  std::lock_guard lock(mutex_);
  prints_.push_back(std::move(line));
}
std::vector<std::string> RunControl::prints() const {
  std::lock_guard lock(mutex_);
  return prints_;
}

}  // namespace lockvisor::machine
