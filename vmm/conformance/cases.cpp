// The conformance cases. Each check states what KVM (or the SBI spec) says
// must happen, in terms of what the guest reported and what the VMM counted.
// One file (over 500 lines): the suite's whole list, in named groups, so a
// reader sees every case, its order and its expectations in one place.
#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <string_view>

#include "lockvisor/abi/ucall.h"
#include "vmm/conformance/expect.h"
#include "vmm/conformance/suite.h"
#include "vmm/metrics/summary.h"
#include "vmm/report/run_report.h"

namespace lockvisor::conformance {
namespace {
using machine::Outcome;
using machine::RunResult;

machine::MachineConfig two_vcpus(const char* program, std::string args = "") {
  machine::MachineConfig config;
  config.vcpus = 2;
  config.program = program;
  config.args = std::move(args);
  config.echo_guest_prints = false;
  config.capture_serial = true;
  return config;
}

// Guest-reported TSC cycles in ns: 128-bit and saturating, so that no forged
// count wraps around to a plausible value; an unknown TSC rate (0 kHz) gives
// the maximum rather than a division by zero.
std::uint64_t cycles_to_ns(std::uint64_t cycles, std::uint64_t tsc_khz) {
  if (tsc_khz == 0) return ~std::uint64_t{0};
  const unsigned __int128 ns = static_cast<unsigned __int128>(cycles) * 1000000 / tsc_khz;
  return ns > ~std::uint64_t{0} ? ~std::uint64_t{0} : static_cast<std::uint64_t>(ns);
}

std::string latency_notes(const RunResult& run) {
  std::string notes;
  if (const auto* cycles = run.result(0, "kick_wake_cycles"); cycles != nullptr && run.tsc_khz > 0) {
    std::vector<std::uint64_t> ns;
    for (auto c : cycles->values) ns.push_back(cycles_to_ns(c, run.tsc_khz));
    const auto s = metrics::summarize_latency(ns);
    notes += fmt::format("guest-measured kick->wake median {:.1f} us, p99 {:.1f} us", s.p50 / 1000, s.p99 / 1000);
  }
  const auto wake = report::wake_latency_json(run);
  if (wake["count"].get<std::uint64_t>() > 0)
    notes += fmt::format("{}VMM-measured median {:.1f} us, p99 {:.1f} us", notes.empty() ? "" : "; ",
                         wake["p50"].get<double>() / 1000, wake["p99"].get<double>() / 1000);
  return notes;
}

std::string elapsed_notes(const RunResult& run) {
  return fmt::format("{:.2f} s, {} halts, {} returned at once", run.wall_seconds,
                     [&] {
                       std::uint64_t n = 0;
                       for (unsigned i = 0; i < run.vcpus.size(); ++i) n += run.pv(i).halts;
                       return n;
                     }(),
                     [&] {
                       std::uint64_t n = 0;
                       for (unsigned i = 0; i < run.vcpus.size(); ++i) n += run.pv(i).halts_immediate;
                       return n;
                     }());
}

CaseSpec kick_wakes_halted(bool kernel_halt) {
  constexpr std::uint64_t kRounds = 200;
  return {kernel_halt ? "kick-wakes-halted-cpl0-hlt" : "kick-wakes-halted",
          kernel_halt ? "KICK_CPU wakes a vCPU blocked in `hlt` at CPL0"
                      : "KICK_CPU wakes a vCPU blocked in the HALT hypercall",
          two_vcpus("kick-wake", fmt::format("rounds={}{}", kRounds, kernel_halt ? " halt=kernel" : "")),
          [=](const RunResult& run) {
            return Expect(run)
                .outcome(Outcome::kCompleted)
                .pv(0, &pvlock::PvCounts::halts, kRounds)
                .pv(0, &pvlock::PvCounts::halts_immediate, 0)
                .pv(0, &pvlock::PvCounts::halts_woken, kRounds)
                .pv(0, &pvlock::PvCounts::kicks_received, kRounds)
                .pv(1, &pvlock::PvCounts::kicks_sent, kRounds)
                .exits(0, "hlt", kernel_halt ? kRounds : 0)
                .that(run.result(0, "kick_wake_cycles") && run.result(0, "kick_wake_cycles")->values.size() == kRounds,
                      "the guest did not report its kick->wake latencies")
                .done();
          },
          latency_notes,
          "",
          // KVM: every halt is one halt exit into KVM, every kick one
          // hypercall, no halt reaches the VMM. The kicker waits for
          // `blocking`, but KVM sets it before the vCPU's task is on its wait
          // queue: a kick landing in between is caught by the block's own
          // re-check and counted in no statistic, so halt_wakeup (a task
          // found waiting and woken) is below kRounds now and then (199 of
          // 200 once, nested). At least one proves the blocked path.
          [=](const RunResult& run) {
            return Expect(run)
                .outcome(Outcome::kCompleted)
                .kvm(0, "halt_exits", kRounds)
                .kvm_at_least(0, "halt_wakeup", 1)
                .kvm(1, "hypercalls", kRounds)
                .exits(0, "hlt", 0)
                .that(run.result(0, "kick_wake_cycles") && run.result(0, "kick_wake_cycles")->values.size() == kRounds,
                      "the guest did not report its kick->wake latencies")
                .done();
          }};
}

CaseSpec sticky(bool kernel_halt, std::uint64_t kicks) {
  std::string name = kicks > 1 ? "kicks-before-halt-wake-once" : "kick-before-halt-is-sticky";
  if (kernel_halt) name += "-cpl0-hlt";
  return {name,
          kicks > 1 ? "several kicks before one halt make it return once; the next halt blocks"
                    : "a kick before the halt makes it return at once, and is consumed",
          two_vcpus("sticky-kick", fmt::format("kicks={}{}", kicks, kernel_halt ? " halt=kernel" : "")),
          [=](const RunResult& run) {
            return Expect(run)
                .outcome(Outcome::kCompleted)
                .pv(0, &pvlock::PvCounts::halts, 2)
                .pv(0, &pvlock::PvCounts::halts_immediate, 1)
                .pv(0, &pvlock::PvCounts::halts_woken, 1)
                .pv(0, &pvlock::PvCounts::kicks_received, kicks + 1)
                .pv(0, &pvlock::PvCounts::kicks_coalesced, kicks - 1)
                .exits(0, "hlt", kernel_halt ? 2 : 0)
                .done();
          },
          elapsed_notes,
          "",
          // KVM: two hlts, one woken by a kick; the other returned because
          // pv_unhalted was already set (KVM counts it as a successful poll
          // when it polls, as nothing otherwise). Had the early kick been
          // lost, the first hlt would never return (vCPU 1 kicks again only
          // after it has): completing with two halt exits is the proof.
          [=](const RunResult& run) {
            return Expect(run)
                .outcome(Outcome::kCompleted)
                .kvm(0, "halt_exits", 2)
                .kvm(1, "hypercalls", kicks + 1)
                .done();
          }};
}

CaseSpec pingpong(const char* name, unsigned vcpus, std::vector<int> pcpus, std::uint64_t rounds) {
  machine::MachineConfig config = two_vcpus("pingpong", fmt::format("rounds={}", rounds));
  config.vcpus = vcpus;
  config.pcpus = std::move(pcpus);
  return {name,
          fmt::format("{} vCPUs pass a turn around a ring {} times (halt when not our turn, kick the next)", vcpus,
                      rounds),
          config,
          [=](const RunResult& run) {
            Expect expect(run);
            expect.outcome(Outcome::kCompleted);
            std::uint64_t kicks = 0;
            for (unsigned i = 0; i < vcpus; ++i) {
              expect.pv(i, &pvlock::PvCounts::kicks_sent, rounds);
              kicks += run.pv(i).kicks_received;
            }
            return expect.that(kicks == rounds * vcpus, "kicks received != kicks sent").done();
          },
          elapsed_notes,
          "",
          [=](const RunResult& run) {  // KVM counts no received kicks: every vCPU made its kicks
            Expect expect(run);
            expect.outcome(Outcome::kCompleted);
            for (unsigned i = 0; i < vcpus; ++i) expect.kvm(i, "hypercalls", rounds).exits(i, "hlt", 0);
            return expect.done();
          }};
}

CaseSpec fault(const char* kind, const char* mnemonic) {
  return {fmt::format("guest-fault-{}", kind),
          fmt::format("a guest {} is reported with vector and RIP, and ends the run", mnemonic),
          two_vcpus("fault", fmt::format("kind={}", kind)),
          [=](const RunResult& run) {
            return Expect(run)
                .outcome(Outcome::kGuestFault)
                .reason_contains(mnemonic)
                .reason_contains("CPL3")
                .reason_contains("vCPU 0 at RIP 0x1")  // inside the image at 1 MiB
                .done();
          },
          [](const RunResult& run) { return run.reason; }};
}

// The VMM's CPUID table, as guest code sees it: read at CPL0 by the entry
// code (on PVM, CPL3 `cpuid` would see the host's values instead).
CaseSpec cpuid_at_cpl0(bool pv_unhalt, bool dedicated) {
  auto config = two_vcpus("platform");
  config.pv_unhalt = pv_unhalt;
  config.dedicated_hint = dedicated;
  return {fmt::format("cpuid-at-cpl0-pv-{}{}", pv_unhalt ? "on" : "off", dedicated ? "-dedicated" : ""),
          fmt::format("the guest sees the VMM's CPUID: PV_UNHALT {}, REALTIME hint {}, its own APIC ID",
                      pv_unhalt ? "set" : "clear", dedicated ? "set" : "clear"),
          config,
          [=](const RunResult& run) {
            Expect expect(run);
            expect.outcome(Outcome::kCompleted);
            for (unsigned v = 0; v < run.vcpus.size(); ++v)
              expect.result(v, "kvm_signature", 1)
                  .result(v, "pv_unhalt", pv_unhalt ? 1 : 0)
                  .result(v, "realtime", dedicated ? 1 : 0)
                  .result(v, "apic_id", run.vcpus[v].apic_id);
            return expect.done();
          },
          nullptr};
}

// KICK_CPU and the HALT hypercall (or `hlt`): a kick wakes a halted vCPU, and
// one that comes first is remembered once.
std::vector<CaseSpec> halt_and_kick_cases() {
  std::vector<CaseSpec> cases;
  cases.push_back(kick_wakes_halted(false));
  cases.push_back(kick_wakes_halted(true));
  cases.push_back(sticky(false, 1));
  cases.push_back(sticky(true, 1));
  cases.push_back(sticky(false, 5));
  return cases;
}

// The userspace backend's knobs that change when a halted vCPU wakes:
// --kick-delay-us and --halt-poll-us.
std::vector<CaseSpec> userspace_backend_knob_cases() {
  std::vector<CaseSpec> cases;
  constexpr std::uint64_t kRounds = 20;
  auto config = two_vcpus("kick-wake", fmt::format("rounds={}", kRounds));
  config.backend.kick_delay_us = 2000;
  // Timed on the halter's own TSC: the kick comes after its halt began, so
  // the halt lasts at least the delay. (Kick->wake crosses two vCPUs' TSCs;
  // in the nested machine, whose kernel marks its TSC unstable, one round
  // under a CPU hog read 0, the halter's TSC behind the kicker's.)
  cases.push_back({"kick-delay", "--kick-delay-us=2000 delays every wake-up by at least 2 ms", config,
                   [](const RunResult& run) {
                     const auto* cycles = run.result(0, "halt_cycles");
                     std::uint64_t shortest = ~std::uint64_t{0};
                     if (cycles)
                       for (auto c : cycles->values) shortest = std::min(shortest, cycles_to_ns(c, run.tsc_khz));
                     return Expect(run)
                         .outcome(Outcome::kCompleted)
                         .pv(0, &pvlock::PvCounts::halts_woken, kRounds)
                         .that(cycles != nullptr && cycles->values.size() == kRounds && shortest >= 2'000'000,
                               fmt::format("shortest halt {} ns, expected >= 2 ms", shortest))
                         .done();
                   },
                   latency_notes, "--kick-delay-us is the userspace backend's (KVM delivers kicks in the kernel)"});
  config.backend.kick_delay_us = 0;
  config.backend.halt_poll = pvlock::HaltPollSetting::fixed(500000);
  // HALT_FOR: the limit ends a halt nobody kicks, never early; kicks end it
  // as they end HALT.
  cases.push_back(
      {"halt-for", "HALT_FOR: a halt no kick ends lasts its limit (2 ms) and says so; kicks before and during end it",
       two_vcpus("halt-for"),
       [](const RunResult& run) {
         const auto* cycles = run.result(0, "expired_halt_cycles");
         const auto* rehalts = run.result(0, "rehalts");
         const std::uint64_t ns = cycles && cycles->values.size() == 1 ? cycles_to_ns(cycles->values[0], run.tsc_khz) : 0;
         const std::uint64_t again = rehalts && rehalts->values.size() == 1 ? rehalts->values[0] : ~std::uint64_t{0};
         const pvlock::PvCounts& pv = run.pv(0);
         return Expect(run)
             .outcome(Outcome::kCompleted)
             .pv(0, &pvlock::PvCounts::halts, 3 + again)
             .pv(0, &pvlock::PvCounts::halts_expired, 1 + again)
             .pv(1, &pvlock::PvCounts::kicks_sent, 2)
             .that(pv.halts_immediate + pv.halts_woken + pv.halts_polled == 2,
                   fmt::format("{} halts ended by a kick, expected 2", pv.halts_immediate + pv.halts_woken + pv.halts_polled))
             .that(ns >= 2'000'000, fmt::format("the expired halt lasted {} ns, expected >= 2 ms", ns))
             .done();
       },
       elapsed_notes, "HALT_FOR is the userspace backend's doorbell (KVM's `hlt` has no limit)"});
  cases.push_back({"halt-poll", "--halt-poll-us: a kick that arrives while the halter polls ends the poll, no sleep",
                   config, [](const RunResult& run) {
                     return Expect(run)
                         .outcome(Outcome::kCompleted)
                         .pv(0, &pvlock::PvCounts::halts_polled, kRounds)
                         .pv(0, &pvlock::PvCounts::halts_woken, 0)
                         .done();
                   },
                   latency_notes, "--halt-poll-us is the userspace backend's (KVM polls as halt_poll_ns says)"});
  return cases;
}

// Kicks the ABI refuses or answers specially: bad targets, flags and numbers,
// and PV off (with and without --enforce-pv-cpuid).
std::vector<CaseSpec> kick_refusal_cases() {
  std::vector<CaseSpec> cases;
  cases.push_back({"kick-targets", "kick to self, to a missing APIC ID, flags != 0, unknown numbers",
                   two_vcpus("kick-targets"), [](const RunResult& run) {
                     return Expect(run)
                         .outcome(Outcome::kCompleted)
                         .guest_cases_passed(0, 4)
                         .pv(0, &pvlock::PvCounts::kicks_invalid, 1)
                         .pv(0, &pvlock::PvCounts::halts_immediate, 2)
                         .pv(1, &pvlock::PvCounts::kicks_received, 1)
                         .pv(1, &pvlock::PvCounts::halts_woken, 1)
                         .done();
                   }, nullptr, "",
                   [](const RunResult& run) {  // KVM counts no invalid kick: the guest's checks decide
                     return Expect(run)
                         .outcome(Outcome::kCompleted)
                         .guest_cases_passed(0, 4)
                         .kvm(0, "hypercalls", 4)
                         .kvm(1, "halt_exits", 1)
                         .done();
                   }});

  auto config = two_vcpus("pv-off");
  config.pv_unhalt = false;
  cases.push_back({"pv-off-kick-enosys", "PV off: KICK_CPU returns -1000 and wakes nobody", config,
                   [](const RunResult& run) {
                     return Expect(run)
                         .outcome(Outcome::kDeadlock)  // vCPU 1 stays halted: nobody woke it
                         .result(0, "kick_refused", 1)
                         .pv(1, &pvlock::PvCounts::kicks_received, 0)
                         .pv(1, &pvlock::PvCounts::halts_woken, 0)
                         .done();
                   }, nullptr, "",
                   // KVM counts the stop at the end of the run as a
                   // halt_wakeup: vCPU 1's one halt is what it shows; that
                   // it was not woken earlier, its own check says.
                   [](const RunResult& run) {
                     return Expect(run)
                         .outcome(Outcome::kDeadlock)
                         .result(0, "kick_refused", 1)
                         .kvm(1, "halt_exits", 1)
                         .done();
                   }});
  config.backend.enforce_pv_feature_cpuid = false;
  config.args = "enforce=0";
  cases.push_back({"pv-off-kick-unenforced",
                   "PV off, --enforce-pv-cpuid off: KICK_CPU still kicks and returns 0, as KVM does without "
                   "KVM_CAP_ENFORCE_PV_FEATURE_CPUID",
                   config, [](const RunResult& run) {
                     return Expect(run)
                         .outcome(Outcome::kCompleted)
                         .result(0, "kick_refused", 0)
                         .pv(1, &pvlock::PvCounts::halts, 1)
                         .pv(1, &pvlock::PvCounts::halts_woken, 1)
                         .done();
                   }, nullptr, "",
                   // KVM: halt_wakeup neither counts kicks nor every
                   // wake-up (see kvm_at_least): the run completing is what
                   // proves the kick woke vCPU 1's one halt.
                   [](const RunResult& run) {
                     return Expect(run)
                         .outcome(Outcome::kCompleted)
                         .result(0, "kick_refused", 0)
                         .kvm(1, "halt_exits", 1)
                         .kvm_at_least(0, "hypercalls", 1)
                         .done();
                   }});
  return cases;
}

// The SBI PVLOCK extension (--sbi-pvlock on and off).
std::vector<CaseSpec> sbi_pvlock_cases() {
  std::vector<CaseSpec> cases;
  for (bool on : {true, false}) {
    auto config = two_vcpus("sbi-pvlock", on ? "pvlock=1" : "pvlock=0");
    config.sbi_pvlock = on;
    cases.push_back({on ? "sbi-pvlock" : "sbi-pvlock-off",
                     on ? "SBI PVLOCK: probe, kick, INVALID_PARAM, NOT_SUPPORTED, sticky; all three EIDs"
                        : "SBI PVLOCK off: probe says 0, kicks return NOT_SUPPORTED",
                     config, [on](const RunResult& run) {
                       Expect expect(run);
                       expect.outcome(Outcome::kCompleted);
                       if (on)
                         expect.guest_cases_passed(0, 5)
                             .pv(1, &pvlock::PvCounts::halts, 5)
                             .pv(1, &pvlock::PvCounts::halts_immediate, 1)
                             .pv(1, &pvlock::PvCounts::halts_woken, 4)
                             .pv(0, &pvlock::PvCounts::kicks_invalid, 3);
                       else
                         expect.guest_cases_passed(0, 2).pv(0, &pvlock::PvCounts::kicks_sent, 0).pv(1, &pvlock::PvCounts::halts, 0);
                       return expect.done();
                     }, nullptr,
                     on ? "SBI kicks are doorbells the VMM answers, and the VMM cannot wake a vCPU halted inside KVM"
                        : ""});
  }
  return cases;
}

// A turn passed around a ring of vCPUs by halts and kicks, on their own
// CPUs and overcommitted onto one.
std::vector<CaseSpec> pingpong_cases(std::uint64_t rounds) {
  std::vector<CaseSpec> cases;
  cases.push_back(pingpong("pingpong-2-vcpus", 2, {}, rounds));
  cases.push_back(pingpong("pingpong-2-vcpus-one-pcpu", 2, {0}, rounds));
  cases.push_back(pingpong("pingpong-8-vcpus-ring-one-pcpu", 8, {0}, rounds / 5));
  return cases;
}

// A kick that lands before its halt: remembered (sticky), or lost and then
// found by the deadlock detector.
std::vector<CaseSpec> early_kick_cases() {
  std::vector<CaseSpec> cases;
  auto config = two_vcpus("lost-wakeup");
  cases.push_back({"lost-wakeup-sticky", "a kick that lands before the halt is not lost (sticky)", config,
                   [](const RunResult& run) {
                     return Expect(run).outcome(Outcome::kCompleted).pv(1, &pvlock::PvCounts::halts_immediate, 1).done();
                   }, elapsed_notes, "",
                   [](const RunResult& run) {  // one hlt that KVM did not block: pv_unhalted was set
                     return Expect(run).outcome(Outcome::kCompleted).kvm(1, "halt_exits", 1).kvm(1, "halt_wakeup", 0).done();
                   }});
  config.backend.mode = pvlock::KickMode::kLossy;
  cases.push_back({"lost-wakeup-lossy-detected",
                   "lossy kicks: the early kick is dropped and the deadlock detector reports it within a second",
                   config, [](const RunResult& run) {
                     return Expect(run)
                         .outcome(Outcome::kDeadlock)
                         .pv(1, &pvlock::PvCounts::kicks_dropped, 1)
                         .that(run.details.size() == 2, "the report must list every vCPU's state")
                         .that(run.wall_seconds < 1.5, fmt::format("detected after {:.2f} s", run.wall_seconds))
                         .done();
                   }, [](const RunResult& run) { return fmt::format("detected in {:.2f} s", run.wall_seconds); },
                   "KVM's pv_unhalted is always sticky (--kick lossy is refused with --backend kvm)"});

  // --sbi-kick: the SBI kick that lands before the halt.
  for (const bool proposed : {false, true}) {
    auto config = two_vcpus("lost-wakeup", "via=sbi");
    config.sbi_kick_proposed = proposed;
    const char* why_not_kvm = "SBI kicks are doorbells the VMM answers, and the VMM cannot wake a vCPU halted inside KVM";
    if (!proposed)
      cases.push_back({"sbi-kick-before-halt-sticky", "--sbi-kick sticky: an SBI kick before the halt is remembered",
                       config, [](const RunResult& run) {
                         return Expect(run).outcome(Outcome::kCompleted).pv(1, &pvlock::PvCounts::halts_immediate, 1).done();
                       }, elapsed_notes, why_not_kvm});
    else
      cases.push_back({"sbi-kick-before-halt-proposed",
                       "--sbi-kick proposed (the RISC-V host patch): an SBI kick before the halt is lost; the deadlock "
                       "detector reports it",
                       config, [](const RunResult& run) {
                         return Expect(run)
                             .outcome(Outcome::kDeadlock)
                             .pv(1, &pvlock::PvCounts::kicks_dropped, 1)
                             .pv(1, &pvlock::PvCounts::halts_immediate, 0)
                             .done();
                       }, [](const RunResult& run) { return fmt::format("detected in {:.2f} s", run.wall_seconds); },
                       why_not_kvm});
  }
  return cases;
}

// What guest code sees of the platform: every ABI port from CPL3, and the
// VMM's CPUID.
std::vector<CaseSpec> platform_cases() {
  std::vector<CaseSpec> cases;
  cases.push_back({"cpl3-ports",
                   "every ABI port at the ABI's width works from CPL3 (TSS I/O bitmap, IOPL 0), on every vCPU",
                   two_vcpus("platform"), [](const RunResult& run) {
                     Expect expect(run);
                     expect.outcome(Outcome::kCompleted);
                     const std::uint64_t serial_line = std::string_view("cpl3 serial ok\n").size();
                     for (unsigned v = 0; v < 2; ++v)
                       expect.exits(v, "hypercall", 1).exits(v, "sbi", 1).exits(v, "nop", 1)
                           .exits(v, "serial", serial_line + 1);  // + the LSR read
                     auto lines = run.serial_lines;
                     std::sort(lines.begin(), lines.end());
                     return expect
                         .that(lines == std::vector<std::string>{"vCPU 0: cpl3 serial ok", "vCPU 1: cpl3 serial ok"},
                               fmt::format("serial output: expected one line per vCPU, got {} lines", lines.size()))
                         .done();
                   }, nullptr});
  cases.push_back(cpuid_at_cpl0(true, false));
  cases.push_back(cpuid_at_cpl0(false, true));
  return cases;
}

// A guest that fails (a fault, a failed check) ends the run, and the report
// says where and why.
std::vector<CaseSpec> guest_failure_cases() {
  std::vector<CaseSpec> cases;
  cases.push_back(fault("gp", "#GP"));
  cases.push_back(fault("pf", "#PF"));
  cases.push_back(fault("ud", "#UD"));
  cases.push_back(fault("port", "#GP"));  // a port outside the ABI: denied by the I/O bitmap
  cases.push_back(fault("bp", "#BP"));    // a stray int3 is a breakpoint, not a halt
  cases.push_back({"guest-assertion-reported", "a failed guest check is reported with file, line and message",
                   two_vcpus("no-such-program"), [](const RunResult& run) {
                     return Expect(run)
                         .outcome(Outcome::kGuestFailed)
                         .reason_contains("start.cpp:")
                         .reason_contains("unknown guest program 'no-such-program'")
                         .done();
                   }, nullptr});
  return cases;
}

}  // namespace

// The groups in the suite's order: the case names and their order are its
// output (text and JSON), which tests and users compare.
std::vector<CaseSpec> all_cases(const SuiteOptions& options) {
  std::vector<CaseSpec> cases;
  const auto add = [&cases](std::vector<CaseSpec> group) {
    std::move(group.begin(), group.end(), std::back_inserter(cases));
  };
  add(halt_and_kick_cases());
  add(userspace_backend_knob_cases());
  add(kick_refusal_cases());
  add(sbi_pvlock_cases());
  add(pingpong_cases(options.pingpong_rounds));
  add(early_kick_cases());
  add(platform_cases());
  add(guest_failure_cases());

  // --pv-wake: a wake-up before the halt, after it, and to nobody, for the
  // IPI and the NMI (guest/programs/wake_conformance.cpp). The KICK_CPU's own
  // cases are the ones above. Per vCPU 0: both wake-ups taken by its handler
  // and injected by KVM (none from the one to nobody); the early IPI found
  // the wait and ended its `hlt`, the early NMI found no wait (spurious) and
  // the wait returned without halting. Completing is the lost-wakeup
  // detector's verdict: nothing was lost (a lost one halts both vCPUs).
  for (const abi::PvWake wake : {abi::PvWake::kIpi, abi::PvWake::kNmi}) {
    auto config = two_vcpus("wake-conformance");
    config.guest_ring = 0;
    config.pv_wake = wake;
    const bool nmi = wake == abi::PvWake::kNmi;
    auto check = [nmi](const RunResult& run) {
      return Expect(run)
          .outcome(Outcome::kCompleted)
          .result(0, "before_halt_halted", nmi ? 0 : 1)
          .result(0, "wake_interrupts", 2)
          .result(0, "wake_woken", nmi ? 1 : 2)
          .result(0, "wake_spurious", nmi ? 1 : 0)
          .result(0, "wake_halts_skipped", 0)
          // The guest took exactly two; KVM counts a delivery that an exit
          // interrupted twice (a re-injection, seen in the nested machine), so
          // its count is at least the guest's (lockstat/wake_check.h).
          .kvm_at_least(0, nmi ? "nmi_injections" : "irq_injections", 2)
          .kvm(1, nmi ? "nmi_injections" : "irq_injections", 0)
          .kvm(0, "hypercalls", 0)
          .kvm(1, "hypercalls", 0)
          .done();
    };
    cases.push_back({fmt::format("wake-{}", abi::pv_wake_name(wake)),
                     nmi ? "--pv-wake nmi: an NMI before the halt is spurious but not lost (the handler keeps it), "
                           "one after the halt wakes it, one to nobody goes nowhere"
                         : "--pv-wake ipi: an IPI before the halt ends it at once (sticky in the LAPIC), one after the "
                           "halt wakes it, one to nobody goes nowhere",
                     config, check, elapsed_notes, "", check,
                     "an IPI or NMI wake-up needs KVM's in-kernel LAPIC and CPL0 (--backend kvm)"});
  }

  for (auto& c : cases) {
    if (c.config.timeout_s == 0) c.config.timeout_s = options.case_timeout_s;
    c.config.backend_kind = options.backend;
  }
  return cases;
}

}  // namespace lockvisor::conformance
