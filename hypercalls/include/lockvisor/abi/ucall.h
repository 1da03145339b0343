// Guest->VMM report channel, after the KVM selftests' ucall: the guest fills
// a struct Ucall in its own memory and rings kPortUcall with the structure's
// guest-physical address in RBX. The VMM treats every field as untrusted:
// the address and any array it names are bounds-checked against guest
// memory, strings are read up to their fixed capacity and need not be
// terminated, and unknown types end the run with an error.
//
// What the VMM keeps is bounded per VM (vmm/machine/guest_limits.h, one
// flag each): messages of any type (--max-report-messages, default 10^6),
// bytes kept for PRINT text, result keys and values and case names
// (--max-report-bytes, default 64 MiB), cases open at once per vCPU
// (--max-open-cases, default 256), and values per RESULT_ARRAY
// (kUcallMaxArrayLength). A message that would cross a limit ends the run
// as a guest fault. Strings that are not valid UTF-8 are kept with U+FFFD in
// place of each invalid sequence. CASE_END closes the innermost open case of
// that name; one that matches no open case is ignored (but counted).
#pragma once
#include "lockvisor/abi/types.h"

namespace lockvisor::abi {

inline constexpr u32 kUcallMagic = 0x4c56'5543;  // "LVUC"

enum class UcallType : u32 {
  kPrint = 1,        // text: a line for the log
  kAssertFail = 2,   // file, args[0] = line, text = expression and message; the run fails
  kResult = 3,       // text = key, args[0] = value, args[1] = ResultKind
  kResultArray = 4,  // text = key, args[0] = GPA of u64[args[1]] samples, args[2] = ResultKind
  kCaseBegin = 5,    // text = case name
  kCaseEnd = 6,      // text = case name, args[0] = 1 passed, 0 failed
  kDone = 7,         // args[0] = exit code of this vCPU's program (0 = success)
  // args[0] = 0: this vCPU's measured window starts now, 1: it ended. The
  // vCPU thread samples its CPU time, run-queue wait and context switches
  // (one exit at each edge, outside the window).
  kWindowMark = 8,
  // A targeted preemption point (lock_probe.h): args[0] = PreemptKind,
  // args[1] = lock slot, args[2] = the event's index. The VMM checks it
  // against the armed schedule and the vCPU's probe record, then parks the
  // vCPU for the schedule's duration. Without an armed schedule: a guest error.
  kPreemptPoint = 9,
};
inline constexpr u64 kWindowStart = 0;
inline constexpr u64 kWindowEnd = 1;

enum class ResultKind : u64 { kUnsigned = 0, kSigned = 1, kTscCycles = 2, kNanoseconds = 3 };

inline constexpr u32 kUcallTextBytes = 240;
inline constexpr u32 kUcallFileBytes = 96;
inline constexpr u64 kUcallMaxArrayLength = 1u << 22;  // values per RESULT_ARRAY (32 MiB)

struct Ucall {
  u32 magic;
  UcallType type;
  u64 args[4];
  char file[kUcallFileBytes];
  char text[kUcallTextBytes];
};
static_assert(sizeof(Ucall) == 8 + 32 + kUcallFileBytes + kUcallTextBytes);

}  // namespace lockvisor::abi
