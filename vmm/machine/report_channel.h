// The VMM half of the report channel (lockvisor/abi/ucall.h), apart from
// KVM: decoding one Ucall out of guest memory, and keeping what a vCPU's
// messages add up to (results, cases) within the VM's GuestLimits. Both are
// plain functions of bytes, so unit tests and the fuzz target
// (tests/hostile/report_channel_fuzz.cpp) drive them without a VM.
//
// Everything here treats the guest as hostile: addresses and lengths are
// bounds-checked (overflow-safe) against the memory span, strings are read
// up to their fixed capacity and made valid UTF-8, every message and every
// kept byte is charged to the VM's GuestBudget BEFORE anything is
// allocated, and closing a case costs O(log n), not a scan of all cases.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lockvisor/abi/ucall.h"
#include "vmm/machine/guest_limits.h"
#include "vmm/machine/run_result.h"

namespace lockvisor::machine {

// One report-channel message, decoded and validated.
struct UcallMessage {
  abi::UcallType type = abi::UcallType::kPrint;
  std::string text;  // valid UTF-8, at most abi::kUcallTextBytes bytes
  std::string file;  // kAssertFail only; valid UTF-8, at most abi::kUcallFileBytes
  std::uint64_t args[4] = {};
  unsigned replaced_strings = 0;  // how many of text/file had invalid UTF-8 replaced
};

// Decodes the Ucall at guest-physical address `gpa` of `memory` (GPA
// memory_base is memory[0]: 0 on x86, abi::kRiscvRamBase on RISC-V). nullopt
// with *error set (one line, no guest text in it) when the structure lies
// outside memory, the magic is wrong or the type unknown.
std::optional<UcallMessage> decode_ucall(std::span<const std::byte> memory, std::uint64_t gpa, std::string* error,
                                         std::uint64_t memory_base = 0);

// What the vCPU does after a message.
struct UcallAction {
  enum class Kind {
    kContinue,      // re-enter the guest
    kPrint,         // log `text`, then continue (already charged and kept by the caller's choice)
    kAssertFailed,  // the guest's check failed: `text` is the reason line (escaped)
    kDone,          // the program ended with `exit_code`
    kGuestError,    // the guest broke the ABI or a limit: `text` is the reason line (escaped)
    kWindowMark,    // sample the vCPU thread's usage: `exit_code` is the edge (abi::kWindowStart/End)
    kPreemptPoint,  // a targeted preemption point: `args` as the guest sent them (unchecked here)
  };
  Kind kind = Kind::kContinue;
  std::string text;
  std::uint64_t exit_code = 0;
  std::uint64_t args[3] = {};
};

// What one vCPU's report-channel messages add up to.
class GuestReport {
 public:
  // `budget` is shared by every vCPU of the VM and must outlive this.
  // `memory_base`: the GPA of the first byte of the memory handle() is given
  // (decode_ucall).
  explicit GuestReport(GuestBudget& budget, std::uint64_t memory_base = 0)
      : budget_(budget), memory_base_(memory_base) {}

  // Charges, decodes and applies the message at `gpa`. A PRINT is charged
  // (the caller keeps its text); results and cases are kept here.
  UcallAction handle(std::span<const std::byte> memory, std::uint64_t gpa);

  std::vector<ResultValue>& results() { return results_; }
  std::vector<GuestCase>& cases() { return cases_; }
  std::size_t open_cases() const { return open_count_; }
  // Guest strings that had invalid UTF-8 replaced with U+FFFD.
  std::uint64_t replaced_strings() const { return replaced_strings_; }

 private:
  UcallAction apply(const UcallMessage& m, std::span<const std::byte> memory);
  UcallAction error(std::string reason);

  GuestBudget& budget_;
  std::uint64_t memory_base_;
  std::vector<ResultValue> results_;
  std::vector<GuestCase> cases_;
  // Open cases by name: indices into cases_, innermost last. CASE_END closes
  // the innermost open case of that name.
  std::map<std::string, std::vector<std::size_t>, std::less<>> open_;
  std::size_t open_count_ = 0;
  std::uint64_t replaced_strings_ = 0;
};

}  // namespace lockvisor::machine
