#include "vmm/runstate/runstate_pool.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/time.h>
#include <time.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace lockvisor::runstate {
namespace {

constexpr const char* kBpffsMount = "/sys/fs/bpf";

bool disabled() {
  const char* value = std::getenv(kPoolVariable);
  return value != nullptr && (std::strcmp(value, "off") == 0 || std::strcmp(value, "0") == 0);
}

bool is_bpffs(const char* path) {
  struct statfs fs {};
  return ::statfs(path, &fs) == 0 && static_cast<unsigned long>(fs.f_type) == BPF_FS_MAGIC;
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
    }
    ::closedir(d);
  }
  return names;
}

bool make_dir(const std::string& path) { return ::mkdir(path.c_str(), 0700) == 0 || errno == EEXIST; }

double seconds_since_mtime(const struct stat& st) {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<double>(now.tv_sec - st.st_mtim.tv_sec) + (now.tv_nsec - st.st_mtim.tv_nsec) * 1e-9;
}

// Removes a slot directory and its pins if no one holds it and it has not
// been used for kPoolIdleSeconds (its last run stamps it).
void remove_if_idle(const std::string& slot) {
  UniqueFd dir(::open(slot.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  struct stat st {};
  if (!dir.valid() || ::flock(dir.get(), LOCK_EX | LOCK_NB) != 0 || ::fstat(dir.get(), &st) != 0 ||
      seconds_since_mtime(st) < kPoolIdleSeconds)
    return;
  for (const auto& name : entries(slot)) ::unlinkat(dir.get(), name.c_str(), 0);
  ::rmdir(slot.c_str());
}

// Slots of other builds. Another build still in use (a second checkout, a
// CI clone on the same host) keeps its own: removing them at once made two
// builds that run by turns evict each other's programs, and every run of
// both paid a cold load. Once idle as long as a link may stay attached,
// nothing is likely to attach them again.
void remove_other_builds(std::string_view build_id) {
  for (const auto& build : entries(kPoolRoot)) {
    if (build == build_id || build == "reaper") continue;
    const std::string path = fmt::format("{}/{}", kPoolRoot, build);
    for (const auto& slot : entries(path)) remove_if_idle(fmt::format("{}/{}", path, slot));
    ::rmdir(path.c_str());  // fails, harmlessly, while a slot is still there
  }
}

// A directory (bpffs holds no regular files; flock works on directories).
constexpr const char* kReaperLock = "/sys/fs/bpf/lockvisor-runstate/reaper";

UniqueFd lock_reaper() {
  if (::mkdir(kReaperLock, 0700) != 0 && errno != EEXIST) return UniqueFd();
  UniqueFd lock(::open(kReaperLock, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!lock.valid() || ::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) return UniqueFd();
  return lock;
}

// One pass of the reaper: unpins the link of every slot that no run holds
// and that has been idle for kPoolIdleSeconds. Returns whether some link is
// still pinned (then the reaper keeps watching).
bool reap_idle_links() {
  bool pinned_left = false;
  for (const auto& build : entries(kPoolRoot)) {
    const std::string build_path = fmt::format("{}/{}", kPoolRoot, build);
    struct stat bs {};
    if (::stat(build_path.c_str(), &bs) != 0 || !S_ISDIR(bs.st_mode)) continue;
    for (const auto& slot : entries(build_path)) {
      const std::string path = fmt::format("{}/{}", build_path, slot);
      const std::string link = fmt::format("{}/{}", path, kPoolLinkPin);
      if (::access(link.c_str(), F_OK) != 0) continue;
      UniqueFd dir(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      struct stat st {};
      if (!dir.valid() || ::flock(dir.get(), LOCK_EX | LOCK_NB) != 0 || ::fstat(dir.get(), &st) != 0 ||
          seconds_since_mtime(st) < kPoolIdleSeconds) {
        pinned_left = true;
        continue;
      }
      ::unlink(link.c_str());  // the last reference: the program is detached
    }
  }
  return pinned_left;
}

// The reaper: a child that outlives this process by at most
// kPoolIdleSeconds after the last run, holding none of its files. Only one
// runs: it holds the flock on kReaperLock, taken here before the fork (so
// no process is started when one already watches). A reaper that found
// nothing left to watch releases the lock and looks once more, so a run that
// returned a slot meanwhile (and saw the lock held) is not left unwatched.
void start_reaper() {
  UniqueFd lock = lock_reaper();
  if (!lock.valid()) return;  // another one watches
  const pid_t child = ::fork();
  if (child != 0) {
    if (child > 0) ::waitpid(child, nullptr, 0);  // the middle process exits at once
    return;  // our copy of the lock closes; the reaper's keeps it held
  }
  // Middle process: leave the caller's session, then exit, so the reaper is
  // nobody's zombie and no terminal signal reaches it.
  ::setsid();
  if (::fork() != 0) ::_exit(0);
  // Only the lock and /dev/null: a caller waiting for EOF on our output
  // must not wait for the reaper.
  const int keep = lock.get();
  if (keep > 0) ::close_range(0, static_cast<unsigned>(keep) - 1, 0);
  ::close_range(static_cast<unsigned>(keep) + 1, ~0U, 0);
  const int null = ::open("/dev/null", O_RDWR);
  if (null >= 0) {
    for (int fd = 0; fd <= 2; ++fd)
      if (fd != null && fd != keep) ::dup2(null, fd);
  }
  ::prctl(PR_SET_NAME, "lockvisor-reap", 0, 0, 0);
  for (;;) {
    while (reap_idle_links()) ::sleep(1 + kPoolIdleSeconds / 10);
    lock.reset();
    if (!reap_idle_links()) ::_exit(0);
    lock = lock_reaper();
    if (!lock.valid()) ::_exit(0);  // another one took over
  }
}

}  // namespace

PoolLease::~PoolLease() {
  if (!dir.valid()) return;  // moved from
  ::futimens(dir.get(), nullptr);  // the slot's last use: now
  const bool linked = ::faccessat(dir.get(), kPoolLinkPin, F_OK, 0) == 0;
  dir.reset();  // returns the slot
  if (linked) start_reaper();
}

std::optional<PoolLease> lease_pool_slot(std::string_view build_id, std::string& why_not) {
  if (disabled()) {
    why_not = fmt::format("{}=off", kPoolVariable);
    return std::nullopt;
  }
  if (!is_bpffs(kBpffsMount)) {
    // What systemd does at boot, and bpftool before it pins: the kernel's
    // BPF filesystem at its usual place. Root only; a failure just means
    // every run loads its own program.
    if (::mount("bpf", kBpffsMount, "bpf", 0, "mode=0700") != 0 || !is_bpffs(kBpffsMount)) {
      why_not = fmt::format("no bpffs at {} (mount: {})", kBpffsMount, std::strerror(errno));
      return std::nullopt;
    }
    spdlog::debug("runstate: mounted bpffs at {}", kBpffsMount);
  }
  const std::string build = fmt::format("{}/{}", kPoolRoot, build_id);
  if (!make_dir(kPoolRoot) || !make_dir(build)) {
    why_not = fmt::format("cannot create {}: {}", build, std::strerror(errno));
    return std::nullopt;
  }
  for (unsigned slot = 0; slot < kPoolSlots; ++slot) {
    std::string path = fmt::format("{}/{}", build, slot);
    if (!make_dir(path)) continue;
    UniqueFd dir(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir.valid() || ::flock(dir.get(), LOCK_EX | LOCK_NB) != 0) continue;
    // Removed by another process between our mkdir and our lock: not a slot.
    struct stat named {}, held {};
    if (::stat(path.c_str(), &named) != 0 || ::fstat(dir.get(), &held) != 0 || named.st_ino != held.st_ino ||
        named.st_dev != held.st_dev)
      continue;
    if (slot == 0) remove_other_builds(build_id);
    return PoolLease(std::move(dir), std::move(path));
  }
  why_not = fmt::format("all {} pooled programs are in use", kPoolSlots);
  return std::nullopt;
}

void clear_pool_slot(const PoolLease& lease) {
  for (const auto& name : entries(lease.path)) ::unlinkat(lease.dir.get(), name.c_str(), 0);
}

PoolStatus pool_status() {
  PoolStatus status;
  status.enabled = !disabled();
  status.bpffs = is_bpffs(kBpffsMount);
  if (!status.bpffs) return status;
  for (const auto& build : entries(kPoolRoot)) {
    const std::string path = fmt::format("{}/{}", kPoolRoot, build);
    struct stat bs {};
    if (::stat(path.c_str(), &bs) != 0 || !S_ISDIR(bs.st_mode)) continue;
    for (const auto& slot : entries(path)) {
      PoolSlotStatus s;
      s.path = fmt::format("{}/{}", path, slot);
      s.loaded = !entries(s.path).empty();
      s.attached = ::access(fmt::format("{}/{}", s.path, kPoolLinkPin).c_str(), F_OK) == 0;
      UniqueFd dir(::open(s.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      s.in_use = dir.valid() && ::flock(dir.get(), LOCK_EX | LOCK_NB) != 0;
      struct stat st {};
      if (dir.valid() && ::fstat(dir.get(), &st) == 0) s.idle_s = seconds_since_mtime(st);
      status.slots.push_back(std::move(s));
    }
  }
  return status;
}

}  // namespace lockvisor::runstate
