// What the init runs, from the kernel command line (as the guest's PID 1) or
// from its own arguments (as an ordinary process). One table
// (parameters.cpp) names every key for both:
//
//   kernel command line          program option     default  meaning
//   lockvisor.workload=NAME      --workload NAME    hello    hello, idle, futex-hash, lockref, pipe, spawn
//   lockvisor.duration=SECONDS   --duration S       1        decimal seconds, at most 3 fraction digits, 0 < S <= 3600
//   lockvisor.threads=N          --threads N        0        workers; 0 = one per online CPU; at most kMaxThreads
//   lockvisor.seed=N             --seed N           1        seeds each worker's pseudo-random choices
//   lockvisor.sample_every=N     --sample-every N   64       time every Nth operation (1..1048576)
//   lockvisor.futexes=N          --futexes N        1024     futex-hash: futex words shared by all workers (1..65536)
//
// '-' and '_' are the same in a key (as in the kernel's own parameters). A
// later occurrence of a key overrides an earlier one (as the kernel does with
// repeated parameters). A lockvisor.* key that is not in the table, a value
// that does not parse or is out of range is an error: the init reports it and
// exits with kExitBadParameters without running anything.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lockvisor::linux_init {

struct Parameters {
  std::string workload = "hello";
  std::uint64_t duration_ms = 1000;
  unsigned threads = 0;
  std::uint64_t seed = 1;
  unsigned sample_every = 64;
  unsigned futexes = 1024;
};

// The kernel command line's prefix for our keys.
inline constexpr std::string_view kCmdlineKeyPrefix = "lockvisor.";

struct ParsedParameters {
  Parameters parameters;       // defaults where a key was missing or bad
  std::vector<std::string> errors;  // one line each; empty when everything parsed
  bool help = false;           // --help (program options only)
};

// The words of /proc/cmdline (split at blanks; a word in double quotes keeps
// its blanks). Words that do not start with "lockvisor." are the kernel's and
// are ignored.
ParsedParameters parse_kernel_command_line(std::string_view cmdline);

// Program options (argv[1..]): "--key value" or "--key=value", and --help.
ParsedParameters parse_program_options(const std::vector<std::string_view>& args);

// One line per key, for --help.
std::string parameters_help();

}  // namespace lockvisor::linux_init
