// A small pool of loaded run-state programs, pinned in bpffs and shared by
// successive runs (docs/runstate.md, "Start-up cost"). Loading the program
// costs tens of milliseconds of BTF parsing and verification; a run that
// leases an already loaded one only opens its pins, zeroes its maps and
// attaches.
//
// Layout: <root>/<build id>/<slot>/{tp_btf|raw_tp, page, threads, history,
// link}, root = /sys/fs/bpf/lockvisor-runstate, build id = a hash of the
// embedded BPF object (so that no build ever attaches another build's
// program), slot 0..kPoolSlots-1. A run holds an exclusive flock on its
// slot's directory for as long as it uses the program: one user per slot at
// a time, released by the kernel when the process ends however it ends.
//
// The link stays pinned too: attaching to sched_switch waits for the
// kernel's tracepoint synchronization (0.04-14 ms measured here), detaching
// likewise. Between runs the attached program costs every host context
// switch two lookups in an empty table (~75-235 ns, docs/runstate.md).
// Bounded: at most kPoolSlots programs per build; slots of other builds are
// removed when no one holds them and they have been idle for
// kPoolIdleSeconds (so two builds in use on one host keep theirs). Cleaned up: a run that returns a slot
// stamps it and makes sure one reaper process exists; the reaper unpins
// (detaches) every link idle for kPoolIdleSeconds, then exits. No link
// stays attached longer than that after the last run.
//
// LOCKVISOR_RUNSTATE_PIN=off disables the pool (every run loads its own).
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/util/unique_fd.h"

namespace lockvisor::runstate {

inline constexpr const char* kPoolRoot = "/sys/fs/bpf/lockvisor-runstate";
inline constexpr unsigned kPoolSlots = 4;
inline constexpr const char* kPoolVariable = "LOCKVISOR_RUNSTATE_PIN";
inline constexpr unsigned kPoolIdleSeconds = 30;
inline constexpr const char* kPoolLinkPin = "link";

// A slot held by this process: the locked directory and its path. Returning
// it (destruction) stamps the slot's last use and, when its link is still
// pinned, starts the reaper unless one runs.
struct PoolLease {
  UniqueFd dir;
  std::string path;
  PoolLease(UniqueFd d, std::string p) : dir(std::move(d)), path(std::move(p)) {}
  PoolLease(PoolLease&&) noexcept = default;
  PoolLease& operator=(PoolLease&&) noexcept = default;
  ~PoolLease();
};

// Leases a free slot for `build_id` (creating the directories, and mounting
// bpffs on /sys/fs/bpf when nothing is mounted there, as bpftool does), or
// says why not in `why_not` (disabled, no bpffs, every slot in use).
std::optional<PoolLease> lease_pool_slot(std::string_view build_id, std::string& why_not);

// Removes every pin of a leased slot (a partial or stale set).
void clear_pool_slot(const PoolLease& lease);

// What doctor shows.
struct PoolSlotStatus {
  std::string path;
  bool loaded = false;    // a program is pinned there
  bool attached = false;  // its link is pinned: it runs on every host context switch
  bool in_use = false;    // a run holds it now
  double idle_s = 0;      // since its last run
};
struct PoolStatus {
  bool enabled = true;
  bool bpffs = false;  // /sys/fs/bpf is a bpffs mount
  std::vector<PoolSlotStatus> slots;
};
PoolStatus pool_status();

}  // namespace lockvisor::runstate
