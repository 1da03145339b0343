// The console protocol between lockvisor's Linux /init (guest/linux/) and the
// VMM that parses its output (vmm/linuxinit/init_report.h). Both sides include
// this header; it holds only constants and the line checksum, so the two can
// never disagree about them.
//
// The init writes its report to its standard output, which is /dev/console:
// the kernel's console, the guest's first serial port. The kernel's own
// messages go to the same port, so every line of the report carries a prefix
// no kernel message has, and a checksum, because printk output can land in
// the middle of a line the init is writing (the tty and the console are two
// paths to the same UART): a line cut in two by a kernel message must not
// parse as a shorter, wrong value.
//
// One line (version 1), at most kMaxLineBytes bytes before the newline:
//
//   lockvisor-init: <record> <key>=<value> <key>=<value> ... crc32=<8 hex digits>
//
//  * <record> and <key> are lower-case names ([a-z0-9_]); each key at most
//    once per line; the fields of each record are listed below.
//  * A <value> contains no space. A number is a plain unsigned decimal
//    integer (no sign, at most 20 digits, at most 2^64 - 1) and never empty;
//    text (marked "text" below) may be empty and is percent-escaped: every
//    byte outside '!'..'~' and every '%' is written as %HH (upper-case hex),
//    so a value never contains a space or a control character, and the text
//    before escaping is at most kMaxTextBytes bytes.
//  * crc32 is the last field: CRC-32 (IEEE 802.3, the zlib one) of every byte
//    of the line before " crc32=", the prefix included, in lower-case hex.
//  * The line ends with '\n'; a '\r' the serial port adds is ignored.
//  * A reader ignores fields it does not know (a later init speaking
//    version 1 may add some) and refuses records it does not know; a start
//    line with another version makes it refuse the whole report.
//
// Records, in the order the init writes them (only start and exit are always
// written; a record appears at most once unless marked "repeated"):
//
//   start     version workload duration_ms threads seed sample_every pid1
//             version: kProtocolVersion; workload: text; threads: as asked
//             (0 = one per online CPU); pid1: 1 when running as the guest's
//             init, 0 when run as an ordinary process (no mounts, no power-off)
//   mount     target(text) errno          repeated, PID 1 only; errno 0 = mounted
//   spinlock_log source(text) errno lines source: "kmsg", "klogctl" or "none";
//             errno 0 when the log was read; lines = spinlock lines that follow
//   spinlock  text(text)                  repeated (at most kMaxSpinlockLines):
//             a kernel log message about PV spinlocks, without the syslog
//             header, e.g. "kvm-guest: PV spinlocks enabled"
//   cpus      sysconf sysfs list(text)   online CPUs by sysconf and by counting
//             /sys/devices/system/cpu/online (sysfs is absent when it could
//             not be read), list = that file's text ("0-3")
//   thread    index ops                   repeated, one per worker, index < threads
//   result    threads ops elapsed_ns      the workload's totals (no result
//             record when the workload does not count operations, e.g. hello)
//   latency   every samples p50_ns p90_ns p99_ns p999_ns max_ns mean_ns
//             single-operation latency, every `every`-th operation sampled,
//             nearest-rank percentiles (vmm/metrics/summary.h)
//   error     text(text)                  repeated (at most kMaxErrorLines)
//   exit      status                      the last line: 0 = the workload ran and
//             its figures are valid; kExitWorkloadFailed, kExitBadParameters
//
// The kernel command line keys that choose the workload are listed in
// guest/linux/parameters.h (lockvisor.workload=..., lockvisor.duration=...).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace lockvisor::linux_init {

inline constexpr std::string_view kLinePrefix = "lockvisor-init: ";
inline constexpr unsigned kProtocolVersion = 1;
inline constexpr std::string_view kCrcKey = "crc32";

// Bounds both sides keep: the init never writes more, the parser refuses more.
inline constexpr std::size_t kMaxLineBytes = 1024;       // one line, prefix and checksum included
inline constexpr std::size_t kMaxTextBytes = 240;        // one text value before escaping
inline constexpr std::size_t kMaxFieldsPerLine = 16;
inline constexpr unsigned kMaxThreads = 256;
inline constexpr unsigned kMaxSpinlockLines = 8;
inline constexpr unsigned kMaxErrorLines = 16;
inline constexpr unsigned kMaxMountLines = 8;
inline constexpr std::uint64_t kMaxDurationMs = 3'600'000;  // one hour

// Exit statuses of the init (the `exit` record, and the process exit code
// when it runs as an ordinary process).
inline constexpr int kExitOk = 0;
inline constexpr int kExitWorkloadFailed = 1;
inline constexpr int kExitBadParameters = 2;

// The workloads the init runs (lockvisor.workload=): the VMM's --workload
// choices with --kernel are these.
inline constexpr std::string_view kWorkloadNames[] = {"hello", "idle", "futex-hash", "lockref", "pipe", "spawn"};

// The argument that makes the program exit at once: the child the spawn
// workload executes.
inline constexpr std::string_view kSpawnChildArgument = "--spawn-child";

// Record names.
namespace record {
inline constexpr std::string_view kStart = "start";
inline constexpr std::string_view kMount = "mount";
inline constexpr std::string_view kSpinlockLog = "spinlock_log";
inline constexpr std::string_view kSpinlock = "spinlock";
inline constexpr std::string_view kCpus = "cpus";
inline constexpr std::string_view kThread = "thread";
inline constexpr std::string_view kResult = "result";
inline constexpr std::string_view kLatency = "latency";
inline constexpr std::string_view kError = "error";
inline constexpr std::string_view kExit = "exit";
}  // namespace record

// CRC-32 (reflected polynomial 0xEDB88320, initial value and final xor
// 0xFFFFFFFF), bit by bit: lines are short and written a few dozen times.
constexpr std::uint32_t crc32(std::string_view bytes) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (const char c : bytes) {
    crc ^= static_cast<unsigned char>(c);
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return crc ^ 0xFFFFFFFFu;
}
static_assert(crc32("123456789") == 0xCBF43926u, "the CRC-32 check value");

}  // namespace lockvisor::linux_init
