#include "vmm/machine/linux_console.h"

#include "vmm/machine/run_control.h"

namespace lockvisor::machine {
namespace {

// Adds one console byte to `line`: true when the line is complete (a
// newline, or kMaxLineBytes reached). A carriage return is dropped.
bool add_byte(std::string& line, char byte) {
  if (byte == '\n') return true;
  if (byte != '\r') line.push_back(byte);
  return line.size() >= LinuxConsole::kMaxLineBytes;
}

void keep_if_report_worthy(std::vector<std::string>& kept, const std::string& line) {
  if (is_report_worthy_kernel_line(line) && kept.size() < LinuxConsole::kMaxKeptLines) kept.push_back(line);
}

}  // namespace

LinuxConsole::LinuxConsole(RunControl& control, LineObserver on_line)
    : control_(control), on_line_(std::move(on_line)) {}

bool is_report_worthy_kernel_line(std::string_view line) {
  static constexpr std::string_view kMarks[] = {"PV spinlocks", "smpboot: ", "Brought up", "Kernel panic",
                                                "BUG: ",        "Oops",      "soft lockup", "hard LOCKUP",
                                                "Run /init",    "clocksource: Switched", "kvm-clock", "tsc: "};
  for (auto mark : kMarks)
    if (line.find(mark) != std::string_view::npos) return true;
  return false;
}

const char* kernel_end_name(KernelEndKind kind) {
  switch (kind) {
    case KernelEndKind::kPanic: return "kernel-panic";
    case KernelEndKind::kInitKilled: return "init-killed";
    case KernelEndKind::kTripleFault: return "triple-fault";
  }
  return "kernel-panic";
}

std::optional<KernelEnd> kernel_end(const std::vector<std::string>& kernel_lines, std::string_view reason) {
  for (const auto& line : kernel_lines) {
    const auto at = line.find("Kernel panic");
    if (at == std::string::npos) continue;
    const bool init = line.find("Attempted to kill init!", at) != std::string::npos;
    return KernelEnd{init ? KernelEndKind::kInitKilled : KernelEndKind::kPanic, line.substr(at)};
  }
  if (reason != RunControl::kShutdownResetReason) return std::nullopt;
  for (auto it = kernel_lines.rbegin(); it != kernel_lines.rend(); ++it)
    for (std::string_view mark : {"BUG: ", "Oops"})
      if (const auto at = it->find(mark); at != std::string::npos)
        return KernelEnd{KernelEndKind::kTripleFault, it->substr(at)};
  return KernelEnd{KernelEndKind::kTripleFault, "the guest's CPU triple-faulted (KVM_EXIT_SHUTDOWN)"};
}

bool LinuxConsole::put(devices::VcpuContext& vcpu, std::uint8_t byte) {
  if (auto over = control_.budget().charge_serial_bytes(1)) return vcpu.guest_error(std::move(*over));
  if (!control_.serial().put(vcpu.index(), static_cast<char>(byte))) {
    const auto why = control_.serial().write_error();
    return vcpu.host_error(why ? *why : "serial output: write failed");
  }
  std::lock_guard lock(mutex_);
  if (add_byte(line_, static_cast<char>(byte))) end_line();
  return true;
}

std::vector<std::string> kept_kernel_lines(std::string_view log) {
  std::vector<std::string> kept;
  std::string line;
  for (const char byte : log)
    if (add_byte(line, byte)) {
      keep_if_report_worthy(kept, line);
      line.clear();
    }
  if (!line.empty()) keep_if_report_worthy(kept, line);
  return kept;
}

void LinuxConsole::end_line() {
  keep_if_report_worthy(kept_, line_);
  if (on_line_)
    if (const auto status = on_line_(line_)) control_.set_guest_status(*status);
  line_.clear();
}

void LinuxConsole::flush() {
  std::lock_guard lock(mutex_);
  if (!line_.empty()) end_line();
}

std::vector<std::string> LinuxConsole::kept_lines() const {
  std::lock_guard lock(mutex_);
  return kept_;
}

}  // namespace lockvisor::machine
