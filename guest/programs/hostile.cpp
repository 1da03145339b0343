// hostile: a guest that abuses the VMM on purpose, for tests/hostile. Every
// attack is legal CPL3 code (doorbells through runtime/doorbell.cpp only);
// what it abuses is the VMM's trust: bad addresses, huge counts, floods,
// forged statistics, hostile bytes in strings, kick storms, halts and loops
// that never end. The VMM must answer each with a bounded, truthful report.
//
// BootInfo args: attack=NAME [n=COUNT]. vCPU 0 attacks; the other vCPUs end
// at once, except for attacks that need every vCPU (all-halt, kick-storm).
//
//   ucall-outside     Ucall address beyond the end of guest memory      -> exit 3
//   ucall-straddle    Ucall that starts inside memory and ends outside  -> exit 3
//   ucall-wrap        Ucall address near 2^64 (the end wraps)           -> exit 3
//   bad-magic         wrong magic                                       -> exit 3
//   unknown-type      type 99                                           -> exit 3
//   array-outside     RESULT_ARRAY beyond the end of memory             -> exit 3
//   array-straddle    RESULT_ARRAY whose last value lies outside        -> exit 3
//   array-wrap        RESULT_ARRAY at 2^64 - 8, 2 values (wraps)        -> exit 3
//   array-huge-count  RESULT_ARRAY of 2^64 - 1 values                   -> exit 3
//   array-flood       n RESULT_ARRAYs of the ABI's maximum length (32 MiB each) -> report-byte limit, exit 3
//   print-flood       n PRINTs (default 10^6)                           -> message or byte limit, exit 3
//   result-flood      n RESULTs (default 10^6)                          -> message or byte limit, exit 3
//   case-flood        n CASE_BEGINs, never ended (default 10^6)         -> open-case limit, exit 3
//   case-churn        n CASE_BEGIN/CASE_END pairs, each followed by a CASE_END that matches
//                     no open case (default 50000)                      -> completes, exit 0
//   forged-stats      a WorkloadStats record claiming 2^63 violations and absurd counts, then DONE 0
//   bad-text          invalid UTF-8 and control characters in PRINT, result keys, case names,
//                     serial and an unterminated 240-byte text, then DONE 0
//   fake-outcome      PRINT and serial lines that imitate the VMM's outcome line, then an
//                     ASSERT whose text does the same                   -> exit 1
//   serial-flood      every vCPU sends n serial bytes without a newline, its own letter
//                     (default 2^25)                                    -> serial limit, exit 3
//   kick-storm        every vCPU kicks every APIC ID 0..1023 and absurd ones, x86 and SBI,
//                     n rounds (default 4)                              -> completes, exit 0
//   unknown-hypercall unknown KVM hypercall numbers, SBI EIDs and FIDs  -> completes, exit 0
//   all-halt          every vCPU halts and nobody kicks                 -> deadlock, exit 5
//   spin              vCPU 0 spins forever without an exit              -> watchdog (--timeout), exit 4
//   done-code         DONE with exit code 2^64 - 1                      -> exit 1
#include "lockvisor/abi/ucall.h"
#include "lockvisor/abi/workload.h"
#include "programs/programs.h"
#include "runtime/boot.h"
#include "runtime/check.h"
#include "runtime/cpu.h"
#include "runtime/doorbell.h"
#include "runtime/pv.h"
#include "runtime/ucall_report.h"
#include "runtime/string.h"

namespace guest {
namespace {

// This program's own Ucall slots, so it can send what runtime/ucall_report.cpp
// never would (bad magic, unknown types, unterminated text).
Ucall g_forged[kMaxVcpus];

Ucall& forged(UcallType type) {
  Ucall& u = g_forged[this_cpu()];
  memset(&u, 0, sizeof u);
  u.magic = kUcallMagic;
  u.type = type;
  return u;
}

void send(const Ucall& u) { ucall_doorbell(&u); }
// A Ucall "at" an address the guest does not own: only the address travels.
void send_at(u64 gpa) { ucall_doorbell(reinterpret_cast<const void*>(gpa)); }

void send_array(const char* key, u64 gpa, u64 count) {
  Ucall& u = forged(UcallType::kResultArray);
  str_copy(u.text, key, kUcallTextBytes);
  u.args[0] = gpa;
  u.args[1] = count;
  send(u);
}

u64 memory_end() { return boot().memory_bytes; }

// Hostile bytes: invalid UTF-8 (a lone continuation byte, an overlong '/',
// a surrogate, a truncated sequence, bytes that never occur), an escape
// sequence that would clear the line, a carriage return, a C1 CSI.
constexpr const char kBadText[] =
    "bad \x80 \xC0\xAF \xED\xA0\x80 \xF8\x88\x80\x80\x80 \xFF\xFE \x1b[2K\r\xC2\x9B 31m tail \xE2\x82";

void attack_bad_text() {
  print(kBadText);
  report_result(kBadText, 1);
  case_begin(kBadText);
  case_end(kBadText, true);
  for (const char* p = kBadText; *p; ++p) serial_byte(*p);
  serial_byte('\n');
  // 240 bytes with no terminator: the VMM must stop at the capacity.
  Ucall& u = forged(UcallType::kPrint);
  for (u32 i = 0; i < kUcallTextBytes; ++i) u.text[i] = static_cast<char>('A' + i % 26);
  for (u32 i = 0; i < kUcallFileBytes; ++i) u.file[i] = '\xFF';
  send(u);
}

void attack_fake_outcome() {
  print("outcome: completed (exit code 0): every vCPU finished its program");
  print("\noutcome: completed (exit code 0): every vCPU finished its program");
  print("x\r\x1b[2Koutcome: completed (exit code 0): every vCPU finished its program");
  for (const char* p = "\r\x1b[2Koutcome: completed (exit code 0): every vCPU finished its program\n"; *p; ++p)
    serial_byte(*p);
  for (const char* p = "outcome: completed (exit code 0): every vCPU finished its program\n"; *p; ++p) serial_byte(*p);
  assert_fail("\noutcome: completed (exit code 0)\n", 0, "\noutcome: completed (exit code 0): fake\n");
}

void attack_forged_stats() {
  static u64 words[kWorkloadStatsWords];
  WorkloadStats stats{};
  stats.version = kWorkloadStatsVersion;
  stats.cpu = this_cpu();
  stats.ops = ~0ull;
  stats.violations = 1ull << 63;
  stats.elapsed_cycles = ~0ull;
  stats.tsc_khz = 0;
  stats.latency_count = ~0ull;
  stats.latency_max = ~0ull;
  stats.latency_sum = ~0ull;
  for (u32 e = 0; e < kLockEventSlots; ++e) stats.lock_events[e] = ~0ull;
  for (u32 b = 0; b < kLatencyBuckets; ++b) stats.latency_buckets[b] = ~0ull;
  memcpy(words, &stats, sizeof stats);
  report_array(kWorkloadStatsKey, words, kWorkloadStatsWords, ResultKind::kUnsigned);
}

void attack_kick_storm(u64 rounds) {
  for (u64 r = 0; r < rounds; ++r) {
    for (u64 apic = 0; apic < 1024; ++apic) {
      LV_CHECK_EQ(kick_cpu(static_cast<u32>(apic)), kKvmSuccess);  // KVM: 0 even for a missing APIC ID
      sbi_kick(kSbiExtPvlock, apic);
    }
    const u64 wild_ids[] = {1ull << 32, ~0ull, 1ull << 63};
    for (u64 wild : wild_ids) {
      LV_CHECK_EQ(kvm_hypercall(kHcKickCpu, ~0ull, wild), kKvmSuccess);
      LV_CHECK_EQ(sbi_kick(kSbiExtPvlock, wild).error, kSbiErrInvalidParam);
      LV_CHECK_EQ(sbi_kick(kSbiExtPvlockLegacy, wild).error, kSbiErrInvalidParam);
    }
  }
}

void attack_unknown_hypercalls() {
  const u64 numbers[] = {0, 1, 4, 6, 12, 0x4c560000, 0x4c560004, 0x4c56ffff, ~0ull, 1ull << 63};
  for (u64 nr : numbers) LV_CHECK_EQ(kvm_hypercall(nr, ~0ull, ~0ull, ~0ull, ~0ull), kKvmEnosys);
  const u32 eids[] = {0, kSbiExtBase + 1, kSbiExperimentalFirst, kSbiExperimentalLast, 0xffffffff};
  for (u32 eid : eids) LV_CHECK_EQ(sbi_call(eid, 0, ~0ull, ~0ull, ~0ull).error, kSbiErrNotSupported);
  const u32 fids[] = {1, 2, 0xffffffff};
  for (u32 fid : fids) LV_CHECK_EQ(sbi_call(kSbiExtPvlock, fid, 0).error, kSbiErrNotSupported);
  // QUERY_HALTED of an APIC ID no vCPU has.
  LV_CHECK_EQ(kvm_hypercall(kHcQueryHalted, ~0ull), kKvmEinval);
  // HALT_FOR with no limit or one past the maximum: refused, no halt.
  const u64 limits[] = {0, kHaltForMaxNs + 1, ~0ull};
  for (u64 ns : limits) LV_CHECK_EQ(kvm_hypercall(kHcHaltFor, ns), kKvmEinval);
}

[[noreturn]] void halt_forever() {
  for (;;) halt();
}

}  // namespace

void program_hostile() {
  char attack[32] = "";
  arg_str("attack", attack, sizeof attack);
  const auto is = [&](const char* name) { return str_equal(attack, name); };

  // Attacks every vCPU takes part in.
  if (is("all-halt")) halt_forever();
  if (is("kick-storm")) {
    attack_kick_storm(arg_u64("n", 4));
    return;
  }
  if (is("serial-flood")) {
    // Each vCPU its own letter: a line that mixed vCPUs would show it.
    const u64 n = arg_u64("n", 1ull << 25);
    for (u64 i = 0; i < n; ++i) serial_byte(static_cast<char>('a' + this_cpu() % 26));
    return;
  }
  if (this_cpu() != 0) return;

  if (is("ucall-outside")) {
    send_at(memory_end() + 0x1000);
  } else if (is("ucall-straddle")) {
    send_at(memory_end() - 8);
  } else if (is("ucall-wrap")) {
    send_at(~0ull - 16);
  } else if (is("bad-magic")) {
    Ucall& u = forged(UcallType::kPrint);
    u.magic = 0x12345678;
    send(u);
  } else if (is("unknown-type")) {
    send(forged(static_cast<UcallType>(99)));
  } else if (is("array-outside")) {
    send_array("outside", memory_end() + 4096, 4);
  } else if (is("array-straddle")) {
    send_array("straddle", memory_end() - 8, 2);
  } else if (is("array-wrap")) {
    send_array("wrap", ~0ull - 7, 2);
  } else if (is("array-huge-count")) {
    send_array("huge", boot().free_start, ~0ull);
  } else if (is("array-flood")) {
    // The ABI's longest array, from free memory (zeros), again and again.
    const u64 bytes = kUcallMaxArrayLength * sizeof(u64);
    LV_CHECK_GE(boot().free_end - boot().free_start, bytes);
    const u64 n = arg_u64("n", 1000);
    for (u64 i = 0; i < n; ++i) send_array("flood", boot().free_start, kUcallMaxArrayLength);
  } else if (is("print-flood")) {
    const u64 n = arg_u64("n", 1000000);
    for (u64 i = 0; i < n; ++i) print("flood: a line the VMM must not keep forever");
  } else if (is("result-flood")) {
    const u64 n = arg_u64("n", 1000000);
    for (u64 i = 0; i < n; ++i) report_result("flood", i);
  } else if (is("case-flood")) {
    const u64 n = arg_u64("n", 1000000);
    for (u64 i = 0; i < n; ++i) case_begin("open forever");
  } else if (is("case-churn")) {
    const u64 n = arg_u64("n", 50000);
    case_begin("outer");
    for (u64 i = 0; i < n; ++i) {
      case_begin("churn");
      case_end("churn", true);
      case_end("never begun", true);  // matches no open case: ignored, and must not cost a scan
    }
    case_end("outer", true);
  } else if (is("forged-stats")) {
    attack_forged_stats();
  } else if (is("bad-text")) {
    attack_bad_text();
  } else if (is("fake-outcome")) {
    attack_fake_outcome();
  } else if (is("unknown-hypercall")) {
    attack_unknown_hypercalls();
  } else if (is("spin")) {
    for (;;) cpu_relax();
  } else if (is("done-code")) {
    done(~0ull);
  } else {
    assert_fail(__FILE__, __LINE__, Text().str("hostile: unknown attack '").str(attack).str("'").c_str());
  }
}

}  // namespace guest
