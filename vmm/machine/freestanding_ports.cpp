#include "vmm/machine/freestanding_ports.h"

#include <cstring>

#include <fmt/format.h>

#include "lockvisor/abi/doorbell.h"
#include "lockvisor/abi/kvm_hypercall.h"
#include "lockvisor/abi/ucall.h"
#include "vmm/util/guest_text.h"
#include "vmm/machine/run_control.h"

namespace lockvisor::machine {
namespace abi = lockvisor::abi;

bool HypercallPorts::on_io(VcpuContext& vcpu, const VcpuExit::PortIo& io) {
  if (!io.write) {  // the doorbells are write-only: reads float high
    float_high(io);
    return true;
  }
  auto& program = static_cast<GuestProgramContext&>(vcpu);
  kvm_regs& regs = vcpu.regs();
  const auto transport = io.port == abi::kPortSbiCall ? pvlock::Transport::kSbi : pvlock::Transport::kKvm;
  const pvlock::HypercallInput in{regs.rax, regs.rbx, regs.rcx, regs.rdx, regs.rsi, vcpu.index()};
  const pvlock::HypercallResult result = table_.dispatch(transport, in);
  program.note_hypercall(result.number);
  regs.rax = result.output.rax;
  if (result.output.rbx) regs.rbx = *result.output.rbx;
  if (!result.output.halt) {
    vcpu.commit_regs();
    return true;
  }
  bool expired = false;
  const bool go_on = vcpu.halt(result.output.halt_limit_ns, &expired);
  if (expired) regs.rax = static_cast<std::uint64_t>(abi::kHaltForExpired);
  vcpu.commit_regs();
  return go_on;
}

namespace {
std::string exception_name(std::uint64_t vector) {
  // Intel SDM vol. 3, table 6-1, and AMD's #HV, #VC, #SX.
  static constexpr const char* kNames[32] = {"#DE", "#DB", "NMI", "#BP", "#OF", "#BR", "#UD", "#NM",
                                             "#DF", "CSO", "#TS", "#NP", "#SS", "#GP", "#PF", nullptr,
                                             "#MF", "#AC", "#MC", "#XM", "#VE", "#CP", nullptr, nullptr,
                                             nullptr, nullptr, nullptr, nullptr, "#HV", "#VC", "#SX", nullptr};
  if (vector < 32 && kNames[vector] != nullptr) return fmt::format("{} (vector {})", kNames[vector], vector);
  if (vector < 32) return fmt::format("vector {} (reserved)", vector);
  if (vector < 256) return fmt::format("vector {} (not an exception: an interrupt vector)", vector);
  return fmt::format("vector {} (no such vector)", vector);
}
}  // namespace

bool FaultPort::on_io(VcpuContext& vcpu, const VcpuExit::PortIo& io) {
  if (!io.write) {  // only a write reports an exception
    float_high(io);
    return true;
  }
  const kvm_regs& regs = vcpu.regs();
  const std::uint64_t vector = regs.rbx;
  static_cast<GuestProgramContext&>(vcpu).note_fault_rip(regs.rdx);
  std::string what = fmt::format("guest exception {}, error code {:#x}, CPL{}", exception_name(vector), regs.rcx,
                                 regs.rdi & 3);
  if (vector == 14) what += fmt::format(", CR2 {:#x}", regs.rsi);
  return vcpu.guest_error(std::move(what));
}

bool NopPort::on_io(VcpuContext&, const VcpuExit::PortIo& io) {
  float_high(io);
  return true;
}

bool Com1Transmitter::on_io(VcpuContext& vcpu, const VcpuExit::PortIo& io) {
  if (!io.write) {
    std::memset(io.data.data(), io.port == abi::kPortCom1Lsr ? 0x60 : 0, io.data.size());
    return true;
  }
  if (io.port != abi::kPortCom1) return true;  // writes to other registers: no effect
  // Charged before anything is written: the limit bounds what a guest makes
  // the VMM write to the console or the --serial file.
  if (auto over = control_.budget().charge_serial_bytes(io.count)) return vcpu.guest_error(std::move(*over));
  for (std::uint32_t i = 0; i < io.count; ++i) {
    if (!control_.serial().put(vcpu.index(), static_cast<char>(io.data[std::size_t{i} * io.size]))) {
      const auto why = control_.serial().write_error();
      return vcpu.host_error(why ? *why : "serial output: write failed");
    }
  }
  return true;
}

ReportChannelPort::ReportChannelPort(RunControl& control, const kvm::GuestMemory& memory, unsigned vcpus)
    : control_(control), memory_(memory) {
  for (unsigned i = 0; i < vcpus; ++i) vcpus_.push_back(std::make_unique<PerVcpu>(control.budget()));
}

bool ReportChannelPort::on_io(VcpuContext& vcpu, const VcpuExit::PortIo& io) {
  if (!io.write) {
    float_high(io);
    return true;
  }
  auto& program = static_cast<GuestProgramContext&>(vcpu);
  PerVcpu& mine = *vcpus_.at(vcpu.index());
  auto action = mine.report.handle(memory_.all(), vcpu.regs().rbx);
  switch (action.kind) {
    case UcallAction::Kind::kContinue:
      return true;
    case UcallAction::Kind::kPrint:
      // Shown escaped and prefixed, so that a guest line cannot pass for one
      // of the VMM's own (no VMM line starts with "guest ").
      if (control_.config().echo_guest_prints)
        fmt::print("guest vCPU {}| {}\n", vcpu.index(), console_escape(action.text));
      control_.add_print(fmt::format("vCPU {}: {}", vcpu.index(), action.text));
      return true;
    case UcallAction::Kind::kAssertFailed:
      return program.program_failed(fmt::format("vCPU {}: {}", vcpu.index(), action.text));
    case UcallAction::Kind::kDone:
      mine.exit_code = action.exit_code;
      return program.program_done(action.exit_code);
    case UcallAction::Kind::kWindowMark:
      // On the vCPU's own thread: the sample is this vCPU thread's usage.
      (action.exit_code == abi::kWindowStart ? mine.window_start : mine.window_end) = metrics::sample_thread_usage();
      return true;
    case UcallAction::Kind::kPreemptPoint: {
      auto verdict = program.preempt_point(memory_.all(), action.args);
      if (!verdict.refused.empty()) return vcpu.guest_error(std::move(verdict.refused));
      // The park is served before the next KVM_RUN, so the vCPU stops
      // exactly at its preemption point.
      program.park(verdict.park);
      return true;
    }
    case UcallAction::Kind::kGuestError:
      break;
  }
  return vcpu.guest_error(std::move(action.text));
}

void ReportChannelPort::fill(unsigned index, VcpuReport& report) {
  PerVcpu& mine = *vcpus_.at(index);
  report.guest_exit_code = mine.exit_code;
  report.window_start = mine.window_start;
  report.window_end = mine.window_end;
  report.results = std::move(mine.report.results());
  report.cases = std::move(mine.report.cases());
  report.guest_text_replaced = mine.report.replaced_strings();
}

}  // namespace lockvisor::machine
