// This process's memory as the kernel counts it, and the host's free memory:
// what building and running a VM adds to the VMM process (bench's start-up
// sweep over vCPU counts). Guest RAM the guest or the VMM has touched is the
// VMM's own anonymous memory, so it counts here too.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lockvisor::host {

struct ProcessMemory {
  std::uint64_t rss_kib = 0;       // resident (/proc/self/smaps_rollup Rss)
  std::uint64_t pss_kib = 0;       // proportional: shared pages divided among their mappers (Pss)
  std::uint64_t anon_kib = 0;      // resident anonymous memory (/proc/self/status RssAnon)
  std::uint64_t peak_rss_kib = 0;  // the most resident since the start or reset_peak_rss() (VmHWM)
};

// The value of a "Key:   N kB" line (smaps_rollup, status, meminfo), or
// nullopt when `text` has no such line or its value is not a number of kB.
std::optional<std::uint64_t> kib_field(std::string_view text, std::string_view key);

// Reads this process's figures; throws a host lockvisor::Error when /proc
// cannot tell them.
ProcessMemory read_process_memory();

// Makes the peak (VmHWM) the current resident size, so that a later read
// gives the peak of what follows (/proc/self/clear_refs, "5", Linux 4.0 on);
// throws a host lockvisor::Error when the kernel refuses.
void reset_peak_rss();

// The host's free memory (/proc/meminfo MemFree). What the kernel allocates
// for a VM (vCPU structures, the MMU's pages, kvm_run pages) is nobody's
// resident memory; the drop in free memory shows it, along with whatever
// else the host did meanwhile.
std::optional<std::uint64_t> host_free_kib();

// The host's transparent huge page mode for anonymous memory ("always",
// "madvise" or "never": the bracketed word of
// /sys/kernel/mm/transparent_hugepage/enabled), nullopt when unreadable.
// With "always", guest RAM becomes resident 2 MiB at a time: one touched
// byte of a vCPU's guest stack makes its whole 2 MiB region resident.
std::optional<std::string> transparent_hugepages();

}  // namespace lockvisor::host
