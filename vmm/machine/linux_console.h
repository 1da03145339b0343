// A Linux guest's console: the bytes its kernel and init write to COM1.
//
// Each byte is charged against the guest's serial budget before anything
// is kept (crossing it ends the run as a guest fault naming
// --max-serial-bytes), shown through the serial console (escaped, one stream
// for the VM), and assembled into lines for `on_line` — the parser of the
// in-guest init's reports — and for the kernel-log lines the report keeps
// (the spinlock decision, the CPUs brought up). A line longer than
// kMaxLineBytes is cut there: its rest starts a new line, so a guest cannot
// make the VMM hold an unbounded line.
#pragma once
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/devices/io_bus.h"

namespace lockvisor::machine {

class RunControl;

class LinuxConsole {
 public:
  static constexpr std::size_t kMaxLineBytes = 4096;
  static constexpr std::size_t kMaxKeptLines = 2000;

  // Sees every line; returns the guest's exit status when the line reports
  // it (the in-guest init's last word before it powers off).
  using LineObserver = std::function<std::optional<std::uint64_t>(std::string_view line)>;
  LinuxConsole(RunControl& control, LineObserver on_line);

  // The UART's sink (devices::Uart8250::Sink).
  bool put(devices::VcpuContext& vcpu, std::uint8_t byte);
  // At the end of the run: an unterminated last line still counts.
  void flush();
  // Kernel lines that matter to the report: those that name the spinlock
  // choice, CPU bring-up, panics and oopses (at most kMaxKeptLines).
  std::vector<std::string> kept_lines() const;

 private:
  void end_line();  // with mutex_ held

  RunControl& control_;
  LineObserver on_line_;
  mutable std::mutex mutex_;
  std::string line_;
  std::vector<std::string> kept_;
};

// Whether a kernel log line is one the report keeps.
bool is_report_worthy_kernel_line(std::string_view line);
// The lines a LinuxConsole would keep had it seen all of `log` (a console
// log written by another VMM, say): split and cut the same way, so that
// kernel_end() reads a log as it reads a live console.
std::vector<std::string> kept_kernel_lines(std::string_view log);

// How a Linux kernel ended when it crashed, each its own outcome of a run
// (exit code 3, a guest fault): a panic; a panic because init died
// ("Attempted to kill init!": an oops in init, or init exiting); a triple
// fault without a panic before it. The kernel resets the machine after a
// panic (panic=-1), so the reset says nothing: the console says what
// happened.
enum class KernelEndKind { kPanic, kInitKilled, kTripleFault };
// "kernel-panic", "init-killed", "triple-fault": the outcome's name.
const char* kernel_end_name(KernelEndKind kind);
struct KernelEnd {
  KernelEndKind kind;
  // The panic message from "Kernel panic" on (its timestamp cut off); for a
  // triple fault, the last oops or BUG line, else what KVM saw.
  std::string line;
};
// From the kept kernel lines (LinuxConsole::kept_lines) and the reason the
// run ended with: the first panic line decides; without one, a run that
// ended by a triple fault (RunControl::kShutdownResetReason) is one.
// nullopt for every other end.
std::optional<KernelEnd> kernel_end(const std::vector<std::string>& kernel_lines, std::string_view reason);

}  // namespace lockvisor::machine
