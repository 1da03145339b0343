#include "vmm/arch/riscv64/rv_conformance.h"

#include <cstdint>
#include <functional>
#include <optional>

#include <fmt/format.h>

#include "lockvisor/abi/boot_info.h"
#include "lockvisor/abi/sbi_pvlock.h"
#include "vmm/arch/arch_name.h"
#include "vmm/arch/riscv64/rv_machine.h"
#include "vmm/experiment/workload_settings.h"
#include "vmm/util/error.h"

namespace lockvisor::arch::riscv64 {

namespace {

// A case's check of its run: nullopt when it passed, else why not.
using Check = std::function<std::optional<std::string>(const RvRunResult&)>;

struct CaseSpec {
  const char* name;
  const char* program;
  unsigned harts;
  bool pvlock;
  KickMode kick;
  machine::Outcome expected;
  Check check;
};

// The value hart `hart` reported for `key`, as the signed number SBI
// errors are.
std::optional<std::int64_t> result(const RvRunResult& r, unsigned hart, const std::string& key) {
  if (hart >= r.harts.size()) return std::nullopt;
  for (const auto& v : r.harts[hart].results)
    if (v.key == key && v.values.size() == 1) return static_cast<std::int64_t>(v.values[0]);
  return std::nullopt;
}

// Every (hart, key, value) expected; the first one that differs.
std::optional<std::string> expect(const RvRunResult& r,
                                  std::initializer_list<std::tuple<unsigned, const char*, std::int64_t>> want) {
  for (const auto& [hart, key, value] : want) {
    const auto got = result(r, hart, key);
    if (!got) return fmt::format("hart {} reported no {}", hart, key);
    if (*got != value) return fmt::format("hart {}: {} = {}, want {}", hart, key, *got, value);
  }
  return std::nullopt;
}

const CaseSpec kCases[] = {
    {"sbi-pvlock", "rv-sbi-pvlock", 2, true, KickMode::kSticky, machine::Outcome::kCompleted,
     [](const RvRunResult& r) {
       return expect(r, {{0, "probe_alias", 1},
                         {0, "probe_pvlk", 0},  // answered by the kernel
                         {0, "probe_legacy", 0},
                         {0, "kick_bad_hart_error", abi::kSbiErrInvalidParam},
                         {0, "kick_unknown_fid_error", abi::kSbiErrNotSupported},
                         {0, "kick_self_error", abi::kSbiSuccess},
                         {0, "self_wait_returned", 1},
                         {1, "peer_woken", 1}});
     }},
    {"sbi-pvlock-off", "rv-sbi-pvlock", 2, false, KickMode::kSticky, machine::Outcome::kCompleted,
     [](const RvRunResult& r) {
       return expect(r, {{0, "probe_alias", 0},
                         {0, "kick_bad_hart_error", abi::kSbiErrNotSupported},
                         {0, "kick_unknown_fid_error", abi::kSbiErrNotSupported},
                         {0, "kick_self_error", abi::kSbiErrNotSupported}});
     }},
    {"sbi-kick-before-wait-sticky", "rv-kick-before-wait", 2, true, KickMode::kSticky, machine::Outcome::kCompleted,
     [](const RvRunResult& r) -> std::optional<std::string> {
       if (auto bad = expect(r, {{1, "early_kick_kept", 1}})) return bad;
       // The one WFI of hart 1 returned because of the one kick it got.
       const auto& h = r.harts[1];
       if (h.wfi_exits != h.pv.kicks_received)
         return fmt::format("hart 1: {} halts (WFI) but {} kicks received", h.wfi_exits, h.pv.kicks_received);
       return std::nullopt;
     }},
    {"sbi-kick-before-wait-proposed", "rv-kick-before-wait", 2, true, KickMode::kProposed,
     machine::Outcome::kDeadlock,
     [](const RvRunResult& r) -> std::optional<std::string> {
       if (r.harts.size() < 2 || r.harts[1].pv.kicks_dropped != 1)
         return fmt::format("the early kick was not counted as dropped on hart 1");
       return std::nullopt;
     }},
    {"guest-fault-named", "fault", 1, true, KickMode::kSticky, machine::Outcome::kGuestFault,
     [](const RvRunResult& r) -> std::optional<std::string> {
       if (r.reason.find("guest fault on hart 0") == std::string::npos)
         return fmt::format("the fault is not named: {}", r.reason);
       return std::nullopt;
     }},
    {"torture-pvqspinlock", "torture", 4, true, KickMode::kSticky, machine::Outcome::kCompleted,
     [](const RvRunResult& r) -> std::optional<std::string> {
       for (unsigned i = 0; i < r.harts.size(); ++i)
         if (!r.harts[i].done) return fmt::format("hart {} did not report DONE", i);
       return std::nullopt;
     }},
};

}  // namespace

std::vector<RvCase> run_rv_conformance(std::span<const std::byte> image) {
  std::vector<RvCase> cases;
  for (const CaseSpec& spec : kCases) {
    RvMachineConfig config;
    config.image = image;
    config.boot.harts = spec.harts;
    config.boot.program = spec.program;
    config.boot.flags = spec.pvlock ? abi::kBootFlagSbiPvlock : 0;
    config.boot.sbi_experimental_eid = abi::kSbiExtPvlockExperimentalDefault;
    config.kick = spec.kick;
    config.timeout_seconds = 120;
    if (std::string_view(spec.program) == "torture") {
      // The workload's defaults, one second long: what `run --workload
      // torture --lock pvqspinlock --duration 1` passes.
      experiment::WorkloadSettings w;
      w.workload = "torture";
      w.lock = "pvqspinlock";
      w.duration_s = 1;
      const auto params = experiment::workload_params(w, 1, spec.harts);
      config.boot.workload = params;
      config.boot.args = experiment::guest_args(w, params);
    }
    RvCase c;
    c.name = spec.name;
    try {
      const RvRunResult r = run_rv_machine(config);
      c.outcome = machine::outcome_name(r.outcome);
      c.seconds = r.wall_seconds;
      if (r.outcome != spec.expected) {
        c.reason = fmt::format("outcome {} ({}), want {}", c.outcome, r.reason, machine::outcome_name(spec.expected));
      } else if (auto bad = spec.check(r)) {
        c.reason = *bad;
      }
    } catch (const Error& e) {
      c.outcome = "error";
      c.reason = e.what();
    }
    c.passed = c.reason.empty();
    cases.push_back(std::move(c));
  }
  return cases;
}

nlohmann::json rv_conformance_json(const std::vector<RvCase>& cases) {
  nlohmann::json list = nlohmann::json::array();
  unsigned passed = 0;
  for (const auto& c : cases) {
    passed += c.passed ? 1 : 0;
    list.push_back({{"name", c.name},
                    {"applicable", true},
                    {"passed", c.passed},
                    {"reason", c.reason},
                    {"outcome", c.outcome},
                    {"seconds", c.seconds}});
  }
  return {{"arch", kRiscv64},
          {"passed", passed},
          {"failed", cases.size() - passed},
          {"not_applicable", 0},
          {"cases", list}};
}

}  // namespace lockvisor::arch::riscv64
