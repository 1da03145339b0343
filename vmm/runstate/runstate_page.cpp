// The run-state page's host side from end to end: load and verify the BPF
// object, attach it, map its two arrays, register vCPU threads, and lease a
// pooled copy (runstate_pool.h). Kept in one file (over 500 lines) because
// every step touches the same libbpf handles and their clean-up order.
#include "vmm/runstate/runstate_page.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "vmm/runstate/runstate_bpf_shared.h"
#include "vmm/runstate/runstate_pool.h"
#include "vmm/util/error.h"
#include "vmm/util/mapping.h"

// The BPF object, embedded byte for byte by vcpu_runstate_blob.S.
extern "C" const unsigned char lockvisor_runstate_bpf_start[];
extern "C" const unsigned char lockvisor_runstate_bpf_end[];

namespace lockvisor::runstate {
namespace {

static_assert(sizeof(abi::VcpuRunState) * abi::kRunStateMaxVcpus == abi::kRunStateBytes);
// The kernel lays out array entries at round_up(value_size, 8): the mapping's
// stride is sizeof() only if that is already a multiple of 8.
static_assert(sizeof(lockvisor_preemption_history) % 8 == 0);

// ---- libbpf's log: to spdlog at debug level, and to the current load attempt.

thread_local std::vector<std::string>* t_capture = nullptr;

int libbpf_print(enum libbpf_print_level /*level*/, const char* format, va_list args) {
  std::array<char, 1024> small{};
  va_list copy;
  va_copy(copy, args);
  int n = std::vsnprintf(small.data(), small.size(), format, copy);
  va_end(copy);
  if (n < 0) return 0;
  std::string text;
  if (static_cast<std::size_t>(n) < small.size()) {
    text.assign(small.data(), static_cast<std::size_t>(n));
  } else {
    text.resize(static_cast<std::size_t>(n) + 1);
    std::vsnprintf(text.data(), text.size(), format, args);
    text.resize(static_cast<std::size_t>(n));
  }
  std::string_view rest = text;
  while (!rest.empty()) {
    std::size_t end = rest.find('\n');
    std::string_view line = rest.substr(0, end);
    if (!line.empty()) {
      spdlog::debug("runstate: {}", line);
      if (t_capture != nullptr) t_capture->emplace_back(line);
    }
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }
  return n;
}

void route_libbpf_log() {
  static std::once_flag once;
  std::call_once(once, [] { libbpf_set_print(libbpf_print); });
}

// Collects libbpf's messages while it lives (one load attempt).
class LogCapture {
 public:
  LogCapture() : previous_(std::exchange(t_capture, &lines_)) {}
  ~LogCapture() { t_capture = previous_; }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // The verifier's verdict: the last line of the load log libbpf prints
  // between "-- BEGIN PROG LOAD LOG --" and "-- END PROG LOAD LOG --".
  std::string verifier_verdict() const {
    std::string last;
    bool inside = false;
    for (const std::string& line : lines_) {
      if (line.find("-- BEGIN PROG LOAD LOG --") != std::string::npos) {
        inside = true;
      } else if (line.find("-- END PROG LOAD LOG --") != std::string::npos) {
        inside = false;
      } else if (inside && line.find("processed ") != 0 && line.find("verification time") != 0) {
        last = line;
      }
    }
    return last;
  }
  bool saw_load_log() const {
    for (const std::string& line : lines_)
      if (line.find("-- BEGIN PROG LOAD LOG --") != std::string::npos) return true;
    return false;
  }
  std::string last_line() const { return lines_.empty() ? std::string() : lines_.back(); }

 private:
  std::vector<std::string> lines_;
  std::vector<std::string>* previous_;
};

// ---- RAII for libbpf's objects.

struct ObjectCloser {
  void operator()(bpf_object* object) const noexcept { bpf_object__close(object); }
};
struct LinkDestroyer {
  void operator()(bpf_link* link) const noexcept { bpf_link__destroy(link); }
};
using ObjectPtr = std::unique_ptr<bpf_object, ObjectCloser>;
using LinkPtr = std::unique_ptr<bpf_link, LinkDestroyer>;

std::string errno_text(int error) { return fmt::format("{} ({})", std::strerror(error), strerrorname_np(error)); }

// A load attempt that failed, and whether another attach type could help.
struct LoadFailure {
  std::string reason;
  bool final = false;  // privilege or environment: the other attach type fails the same way
};

// The kernel's ID of the initial PID namespace (PROC_PID_INIT_INO).
constexpr ino_t kInitPidNamespaceInode = 0xEFFFFFFCU;

std::string environment_problem() {
  struct stat ns {};
  if (::stat("/proc/self/ns/pid", &ns) == 0 && ns.st_ino != kInitPidNamespaceInode)
    return "this process runs in a child PID namespace, and the program identifies vCPU threads by their global "
           "thread ids, which it cannot see";
  if (::access("/sys/kernel/btf/vmlinux", R_OK) != 0)
    return fmt::format("the kernel exposes no BTF (/sys/kernel/btf/vmlinux: {}; it needs CONFIG_DEBUG_INFO_BTF)",
                       std::strerror(errno));
  return {};
}

// Whether this process holds what loading a tracing program takes:
// CAP_BPF with CAP_PERFMON (Linux >= 5.8), or CAP_SYS_ADMIN.
bool has_bpf_privilege() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3]{};
  if (::syscall(SYS_capget, &header, data) != 0) return true;  // cannot tell: let the load decide
  const auto has = [&data](unsigned cap) { return (data[cap / 32].effective & (1U << (cap % 32))) != 0; };
  constexpr unsigned kCapPerfmon = 38, kCapBpf = 39;  // <linux/capability.h> of older headers lacks them
  return has(CAP_SYS_ADMIN) || (has(kCapBpf) && has(kCapPerfmon));
}

std::string privilege_reason(int error) {
  return fmt::format("no BPF privilege: loading a tracing program needs root, or CAP_BPF with CAP_PERFMON ({})",
                     errno_text(error));
}

// bpf_prog_info or bpf_map_info: the kernel's id of a program or map.
template <typename Info>
std::uint32_t object_id(int fd) {
  Info info{};
  std::uint32_t length = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &length) != 0) return 0;
  return info.id;
}

}  // namespace

const char* run_state_name(abi::RunState state) {
  switch (state) {
    case abi::RunState::kUnknown: return "unknown";
    case abi::RunState::kRunning: return "running";
    case abi::RunState::kPreempted: return "preempted";
    case abi::RunState::kSleeping: return "sleeping";
  }
  return "invalid";
}

abi::RunState load_state(const abi::VcpuRunState& record) {
  return static_cast<abi::RunState>(__atomic_load_n(&record.state, __ATOMIC_ACQUIRE));
}

abi::VcpuRunState read_record(const abi::VcpuRunState& record) {
  abi::VcpuRunState copy{};
  // The writer finishes a record in well under a microsecond with interrupts
  // off; the bound only guards against a broken page.
  for (int attempt = 0; attempt < 1'000'000; ++attempt) {
    std::uint32_t before = __atomic_load_n(&record.seq, __ATOMIC_ACQUIRE);
    if (before & 1U) {
      __builtin_ia32_pause();
      continue;
    }
    copy.seq = before;
    copy.state = __atomic_load_n(&record.state, __ATOMIC_RELAXED);
    copy.state_since_ns = __atomic_load_n(&record.state_since_ns, __ATOMIC_RELAXED);
    copy.preemptions = __atomic_load_n(&record.preemptions, __ATOMIC_RELAXED);
    copy.sleeps = __atomic_load_n(&record.sleeps, __ATOMIC_RELAXED);
    copy.runs = __atomic_load_n(&record.runs, __ATOMIC_RELAXED);
    copy.preempted_ns = __atomic_load_n(&record.preempted_ns, __ATOMIC_RELAXED);
    copy.host_cpu = __atomic_load_n(&record.host_cpu, __ATOMIC_RELAXED);
    copy.anomalies = __atomic_load_n(&record.anomalies, __ATOMIC_RELAXED);
    copy.reserved = __atomic_load_n(&record.reserved, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&record.seq, __ATOMIC_RELAXED) == before) break;
  }
  return copy;
}

struct RunStatePage::Impl {
  // Destroyed bottom-up: unmap, detach, then close the object (maps,
  // program) or the pinned objects' fds, and last release the pool slot.
  std::optional<PoolLease> lease;  // a pooled program (open_shared)
  UniqueFd pinned_program, pinned_page, pinned_threads, pinned_history;
  ObjectPtr object;
  LinkPtr link;
  UniqueFd pinned_link;
  Mapping page;
  Mapping history;         // empty when it could not be mapped
  int thread_map_fd = -1;  // owned by `object` or pinned_threads
  int program_fd = -1;     // owned by `object` or pinned_program
  int page_fd = -1;        // owned by `object` or pinned_page
  unsigned max_vcpus = 0;
  std::string attach_point;
  std::uint32_t program_id = 0;
  std::uint32_t page_map_id = 0;
};

namespace {

// Maps the page (and, if it can, the history ring) read-only.
bool map_views(RunStatePage::Impl& impl, int page_fd, int history_fd, LoadFailure& failure) {
  void* address = ::mmap(nullptr, abi::kRunStateBytes, PROT_READ, MAP_SHARED, page_fd, 0);
  if (address == MAP_FAILED) {
    failure = {fmt::format("cannot map the run-state page: {}", errno_text(errno)), true};
    return false;
  }
  impl.page = Mapping(address, abi::kRunStateBytes);
  // The history is a convenience of the timeline: without it (mmap refused)
  // the page still works and the trace reads records instead.
  const std::size_t history_size = (sizeof(lockvisor_preemption_history) * abi::kRunStateMaxVcpus + 4095) / 4096 * 4096;
  if (void* h = ::mmap(nullptr, history_size, PROT_READ, MAP_SHARED, history_fd, 0); h != MAP_FAILED) {
    impl.history = Mapping(h, history_size);
  } else {
    spdlog::debug("runstate: the preemption history is not mapped: {}", errno_text(errno));
  }
  return true;
}

std::unique_ptr<RunStatePage::Impl> try_load(bool tp_btf, LoadFailure& failure) {
  const char* wanted = tp_btf ? LOCKVISOR_RUNSTATE_PROG_TP_BTF : LOCKVISOR_RUNSTATE_PROG_RAW_TP;
  const char* other = tp_btf ? LOCKVISOR_RUNSTATE_PROG_RAW_TP : LOCKVISOR_RUNSTATE_PROG_TP_BTF;
  auto impl = std::make_unique<RunStatePage::Impl>();
  impl->attach_point = tp_btf ? "tp_btf/sched_switch" : "raw_tp/sched_switch";
  LogCapture log;

  LIBBPF_OPTS(bpf_object_open_opts, options, .object_name = "lockvisor_runstate");
  std::size_t size = static_cast<std::size_t>(lockvisor_runstate_bpf_end - lockvisor_runstate_bpf_start);
  impl->object.reset(bpf_object__open_mem(lockvisor_runstate_bpf_start, size, &options));
  if (!impl->object) {
    failure = {fmt::format("the embedded BPF object does not open: {}", errno_text(errno)), true};
    return nullptr;
  }
  bpf_program* program = bpf_object__find_program_by_name(impl->object.get(), wanted);
  bpf_program* unused = bpf_object__find_program_by_name(impl->object.get(), other);
  bpf_map* page_map = bpf_object__find_map_by_name(impl->object.get(), LOCKVISOR_RUNSTATE_PAGE_MAP);
  bpf_map* thread_map = bpf_object__find_map_by_name(impl->object.get(), LOCKVISOR_RUNSTATE_THREAD_MAP);
  bpf_map* history_map = bpf_object__find_map_by_name(impl->object.get(), LOCKVISOR_RUNSTATE_HISTORY_MAP);
  if (program == nullptr || unused == nullptr || page_map == nullptr || thread_map == nullptr ||
      history_map == nullptr) {
    failure = {"the embedded BPF object lacks a program or map (build mismatch)", true};
    return nullptr;
  }
  bpf_program__set_autoload(unused, false);

  if (int error = bpf_object__load(impl->object.get()); error != 0) {
    int code = -error;
    if (log.saw_load_log()) {
      failure.reason = fmt::format("the kernel's verifier refused the {} program ({}): {}", impl->attach_point,
                                   errno_text(code), log.verifier_verdict());
      failure.final = false;
    } else if (code == EPERM || code == EACCES) {
      failure = {privilege_reason(code), true};
    } else {
      std::string detail = log.last_line();
      failure.reason = fmt::format("loading the {} program failed: {}{}{}", impl->attach_point, errno_text(code),
                                   detail.empty() ? "" : ": ", detail);
      failure.final = false;
    }
    return nullptr;
  }

  const int page_fd = bpf_map__fd(page_map);
  if (!map_views(*impl, page_fd, bpf_map__fd(history_map), failure)) return nullptr;

  impl->link.reset(bpf_program__attach(program));
  if (!impl->link) {
    int code = errno;
    failure = {fmt::format("cannot attach to {}: {}", impl->attach_point, errno_text(code)), code == EPERM};
    return nullptr;
  }
  impl->thread_map_fd = bpf_map__fd(thread_map);
  impl->program_fd = bpf_program__fd(program);
  impl->page_fd = page_fd;
  impl->program_id = object_id<bpf_prog_info>(impl->program_fd);
  impl->page_map_id = object_id<bpf_map_info>(page_fd);
  return impl;
}

// ---- The pool (runstate_pool.h): pins of one loaded program per slot.

constexpr const char* kPinPage = "page";
constexpr const char* kPinThreads = "threads";
constexpr const char* kPinHistory = "history";

// Which build's program a pin holds: FNV-1a of the embedded object's bytes.
std::string build_id() {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (const unsigned char* p = lockvisor_runstate_bpf_start; p != lockvisor_runstate_bpf_end; ++p)
    hash = (hash ^ *p) * 0x100000001b3ULL;
  return fmt::format("{:016x}", hash);
}

UniqueFd pinned(const PoolLease& lease, const char* name) {
  return UniqueFd(bpf_obj_get(fmt::format("{}/{}", lease.path, name).c_str()));
}

// Pins a freshly loaded program and its maps into the leased slot, so the
// next run finds them. A failure only costs the next run a load.
void pin_into(const PoolLease& lease, const RunStatePage::Impl& impl) {
  const char* program = impl.attach_point.starts_with("tp_btf") ? "tp_btf" : "raw_tp";
  bpf_map* page = bpf_object__find_map_by_name(impl.object.get(), LOCKVISOR_RUNSTATE_PAGE_MAP);
  bpf_map* history = bpf_object__find_map_by_name(impl.object.get(), LOCKVISOR_RUNSTATE_HISTORY_MAP);
  const std::pair<const char*, int> pins[] = {{kPinPage, bpf_map__fd(page)},
                                              {kPinThreads, impl.thread_map_fd},
                                              {kPinHistory, bpf_map__fd(history)},
                                              {program, impl.program_fd}};  // last: its presence means complete
  for (const auto& [name, fd] : pins) {
    if (bpf_obj_pin(fd, fmt::format("{}/{}", lease.path, name).c_str()) != 0) {
      spdlog::debug("runstate: cannot pin {} in {}: {}", name, lease.path, errno_text(errno));
      clear_pool_slot(lease);
      return;
    }
  }
  // The link too, so that the next run need not attach (runstate_pool.h).
  if (bpf_obj_pin(bpf_link__fd(impl.link.get()), fmt::format("{}/{}", lease.path, kPoolLinkPin).c_str()) != 0)
    spdlog::debug("runstate: cannot pin the link in {}: {}", lease.path, errno_text(errno));
}

// Zeroes every record and history ring and empties the thread table: the
// page a leased program publishes reads exactly like a freshly loaded one
// (all "unknown", every counter 0). Only what a previous run wrote is
// rewritten (the views show it, so a run of 1 vCPU costs a few syscalls,
// not 128). Nothing writes meanwhile: the program may be attached (its
// link pinned), but it writes only records of registered threads, and the
// table is emptied first; only the slot's holder registers, and we hold it.
// Views first: map_views().
bool reset_maps(const RunStatePage::Impl& impl, int page_fd, int history_fd) {
  const abi::VcpuRunState zero_record{};
  const lockvisor_preemption_history zero_history{};
  const auto* records = static_cast<const abi::VcpuRunState*>(impl.page.data());
  const auto* histories = static_cast<const lockvisor_preemption_history*>(impl.history.data());
  const auto is_zero = [](const void* p, std::size_t n) {
    const auto* bytes = static_cast<const unsigned char*>(p);
    return bytes[0] == 0 && std::memcmp(bytes, bytes + 1, n - 1) == 0;
  };
  std::uint32_t key = 0;
  for (unsigned i = 0; i < 2 * LOCKVISOR_RUNSTATE_MAX_THREADS && bpf_map_get_next_key(impl.thread_map_fd, nullptr, &key) == 0;
       ++i)
    bpf_map_delete_elem(impl.thread_map_fd, &key);
  if (bpf_map_get_next_key(impl.thread_map_fd, nullptr, &key) == 0) return false;
  for (std::uint32_t i = 0; i < abi::kRunStateMaxVcpus; ++i) {
    if (!is_zero(&records[i], sizeof(records[i])) && bpf_map_update_elem(page_fd, &i, &zero_record, BPF_ANY) != 0)
      return false;
    // Without a view of the history (mmap refused), zero it blindly.
    if ((histories == nullptr || !is_zero(&histories[i], sizeof(histories[i]))) &&
        bpf_map_update_elem(history_fd, &i, &zero_history, BPF_ANY) != 0)
      return false;
  }
  return is_zero(records, abi::kRunStateBytes);
}

// The program pinned in a leased slot, attached for this run; nullptr (and
// the slot cleared) when the slot holds no complete, usable set.
std::unique_ptr<RunStatePage::Impl> attach_pinned(PoolLease& lease) {
  auto impl = std::make_unique<RunStatePage::Impl>();
  impl->pinned_program = pinned(lease, "tp_btf");
  impl->attach_point = "tp_btf/sched_switch";
  if (!impl->pinned_program.valid()) {
    impl->pinned_program = pinned(lease, "raw_tp");
    impl->attach_point = "raw_tp/sched_switch";
  }
  impl->pinned_page = pinned(lease, kPinPage);
  impl->pinned_threads = pinned(lease, kPinThreads);
  impl->pinned_history = pinned(lease, kPinHistory);
  if (!impl->pinned_program.valid() || !impl->pinned_page.valid() || !impl->pinned_threads.valid() ||
      !impl->pinned_history.valid())
    return nullptr;
  impl->thread_map_fd = impl->pinned_threads.get();
  impl->program_fd = impl->pinned_program.get();
  impl->page_fd = impl->pinned_page.get();
  LoadFailure failure;
  if (!map_views(*impl, impl->pinned_page.get(), impl->pinned_history.get(), failure) ||
      !reset_maps(*impl, impl->pinned_page.get(), impl->pinned_history.get())) {
    spdlog::debug("runstate: pooled program in {} unusable: {}", lease.path, failure.reason);
    return nullptr;
  }
  // Still attached since an earlier run (its link pinned), or attached now
  // and pinned for the next. tp_btf carries its attach point from the load;
  // raw_tp names it here.
  impl->pinned_link = pinned(lease, kPoolLinkPin);
  if (!impl->pinned_link.valid()) {
    const char* tracepoint = impl->attach_point.starts_with("raw_tp") ? "sched_switch" : nullptr;
    impl->pinned_link.reset(bpf_raw_tracepoint_open(tracepoint, impl->program_fd));
    if (!impl->pinned_link.valid()) {
      spdlog::debug("runstate: cannot attach the pooled program in {}: {}", lease.path, errno_text(errno));
      return nullptr;
    }
    if (bpf_obj_pin(impl->pinned_link.get(), fmt::format("{}/{}", lease.path, kPoolLinkPin).c_str()) != 0)
      spdlog::debug("runstate: cannot pin the link in {}: {}", lease.path, errno_text(errno));
  }
  impl->program_id = object_id<bpf_prog_info>(impl->program_fd);
  impl->page_map_id = object_id<bpf_map_info>(impl->pinned_page.get());
  return impl;
}

}  // namespace

RunStatePage::RunStatePage(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RunStatePage::RunStatePage(RunStatePage&&) noexcept = default;
RunStatePage& RunStatePage::operator=(RunStatePage&&) noexcept = default;
RunStatePage::~RunStatePage() = default;

namespace {

void check_open(unsigned max_vcpus) {
  if (max_vcpus == 0 || max_vcpus > abi::kRunStateMaxVcpus)
    fail("the vCPU run-state page describes 1 to {} vCPUs, not {}", abi::kRunStateMaxVcpus, max_vcpus);
  route_libbpf_log();
  if (std::string problem = environment_problem(); !problem.empty())
    fail_host("vCPU run-state page unavailable: {}", problem);
}

std::unique_ptr<RunStatePage::Impl> load_fresh(Attach attach) {
  LoadFailure first;
  std::unique_ptr<RunStatePage::Impl> impl = try_load(attach != Attach::kRawTp, first);
  if (!impl && !first.final && attach == Attach::kAuto) {
    LoadFailure second;
    impl = try_load(false, second);
    if (!impl) fail_host("vCPU run-state page unavailable: {}; and {}", first.reason, second.reason);
  }
  if (!impl) fail_host("vCPU run-state page unavailable: {}", first.reason);
  return impl;
}

}  // namespace

RunStatePage RunStatePage::open(unsigned max_vcpus, Attach attach) {
  check_open(max_vcpus);
  std::unique_ptr<Impl> impl = load_fresh(attach);
  impl->max_vcpus = max_vcpus;
  spdlog::debug("runstate: page for {} vCPUs published by BPF program id {} on {}", max_vcpus, impl->program_id,
                impl->attach_point);
  return RunStatePage(std::move(impl));
}

RunStatePage RunStatePage::open_shared(unsigned max_vcpus) {
  check_open(max_vcpus);
  std::string why_not;
  std::optional<PoolLease> lease = lease_pool_slot(build_id(), why_not);
  std::unique_ptr<Impl> impl;
  if (lease) {
    impl = attach_pinned(*lease);
    if (!impl) {
      clear_pool_slot(*lease);
      impl = load_fresh(Attach::kAuto);
      pin_into(*lease, *impl);
    }
    impl->lease = std::move(lease);
  } else {
    spdlog::debug("runstate: no pooled program ({}): loading one for this run", why_not);
    impl = load_fresh(Attach::kAuto);
  }
  impl->max_vcpus = max_vcpus;
  spdlog::debug("runstate: page for {} vCPUs published by BPF program id {} on {}{}", max_vcpus, impl->program_id,
                impl->attach_point, impl->lease ? fmt::format(" (pooled, {})", impl->lease->path) : "");
  return RunStatePage(std::move(impl));
}

bool RunStatePage::pooled() const { return impl_->lease.has_value(); }

std::string RunStatePage::why_unavailable(unsigned max_vcpus) {
  if (max_vcpus == 0 || max_vcpus > abi::kRunStateMaxVcpus)
    return fmt::format("the page describes 1 to {} vCPUs, not {}", abi::kRunStateMaxVcpus, max_vcpus);
  // The checks of a few microseconds; the PID namespace (a procfs lookup,
  // tens of them here) is left to open().
  if (::access("/sys/kernel/btf/vmlinux", R_OK) != 0) return environment_problem();
  if (!has_bpf_privilege()) return privilege_reason(EPERM);
  return {};
}

void RunStatePage::take_view(Mapping& view) {
  if (view.data() == nullptr || view.size() != abi::kRunStateBytes)
    fail("run-state page: a view must be {} bytes, not {}", abi::kRunStateBytes, view.size());
  // MAP_FIXED replaces the old mapping in one step under the address
  // space's lock: a reader (or KVM, whose MMU notifier drops what it
  // translated through the old one) sees either page, never a hole.
  if (::mmap(view.data(), abi::kRunStateBytes, PROT_READ, MAP_SHARED | MAP_FIXED, impl_->page_fd, 0) == MAP_FAILED) {
    const int code = errno;
    // A failed MAP_FIXED may have unmapped the range already: put zeros
    // ("unknown") back, so the view stays a valid page.
    ::mmap(view.data(), abi::kRunStateBytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    fail_host("run-state page: cannot map it over its view: {}", errno_text(code));
  }
  impl_->page = std::move(view);  // unmaps the first view; the range is now this page's
}

ProbeResult RunStatePage::probe() {
  try {
    RunStatePage page = open(1);
    return {true, page.attach_point()};
  } catch (const Error& e) {
    return {false, e.what()};
  }
}

void RunStatePage::register_thread(pid_t tid, unsigned vcpu) {
  if (tid <= 0) fail("run-state page: {} is not a thread id", tid);
  if (vcpu >= impl_->max_vcpus) fail("run-state page: vCPU {} is outside 0..{}", vcpu, impl_->max_vcpus - 1);
  auto key = static_cast<std::uint32_t>(tid);
  std::uint32_t value = vcpu;
  if (bpf_map_update_elem(impl_->thread_map_fd, &key, &value, BPF_ANY) != 0)
    fail_host("run-state page: cannot register thread {} as vCPU {}: {}", tid, vcpu, errno_text(errno));
}

void RunStatePage::unregister_thread(pid_t tid) {
  auto key = static_cast<std::uint32_t>(tid);
  if (bpf_map_delete_elem(impl_->thread_map_fd, &key) != 0 && errno != ENOENT)
    fail_host("run-state page: cannot unregister thread {}: {}", tid, errno_text(errno));
}

std::vector<std::pair<pid_t, unsigned>> RunStatePage::registered_threads() const {
  std::vector<std::pair<pid_t, unsigned>> threads;
  std::uint32_t key = 0;
  const void* previous = nullptr;  // nullptr: the first key
  // At most LOCKVISOR_RUNSTATE_MAX_THREADS keys; the bound guards against a
  // table that changes under the walk (a thread exiting restarts it).
  for (unsigned i = 0; i < 2 * LOCKVISOR_RUNSTATE_MAX_THREADS; ++i) {
    std::uint32_t next = 0;
    if (bpf_map_get_next_key(impl_->thread_map_fd, previous, &next) != 0) break;
    std::uint32_t vcpu = 0;
    if (bpf_map_lookup_elem(impl_->thread_map_fd, &next, &vcpu) == 0)
      threads.emplace_back(static_cast<pid_t>(next), vcpu);
    key = next;
    previous = &key;
  }
  return threads;
}

std::span<const std::byte> RunStatePage::page() const {
  return {static_cast<const std::byte*>(impl_->page.data()), impl_->page.size()};
}

const abi::VcpuRunState* RunStatePage::records() const {
  return static_cast<const abi::VcpuRunState*>(impl_->page.data());
}

unsigned RunStatePage::max_vcpus() const { return impl_->max_vcpus; }

const lockvisor_preemption_history* RunStatePage::history(unsigned vcpu) const {
  if (impl_->history.data() == nullptr || vcpu >= abi::kRunStateMaxVcpus) return nullptr;
  return static_cast<const lockvisor_preemption_history*>(impl_->history.data()) + vcpu;
}

abi::RunState RunStatePage::state(unsigned vcpu) const {
  if (vcpu >= abi::kRunStateMaxVcpus) return abi::RunState::kUnknown;
  return load_state(records()[vcpu]);
}

abi::VcpuRunState RunStatePage::snapshot(unsigned vcpu) const {
  if (vcpu >= abi::kRunStateMaxVcpus) return abi::VcpuRunState{};
  return read_record(records()[vcpu]);
}

const std::string& RunStatePage::attach_point() const { return impl_->attach_point; }
std::uint32_t RunStatePage::program_id() const { return impl_->program_id; }
std::uint32_t RunStatePage::page_map_id() const { return impl_->page_map_id; }

ProgramStats RunStatePage::program_stats() const {
  bpf_prog_info info{};
  std::uint32_t length = sizeof(info);
  if (bpf_obj_get_info_by_fd(impl_->program_fd, &info, &length) != 0) return {};
  return {info.recursion_misses, info.run_cnt, info.run_time_ns};
}

}  // namespace lockvisor::runstate
