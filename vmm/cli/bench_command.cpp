// lockvisor bench: hypercall and wake-up costs, each measured beside its
// baseline in the same run, reported as medians.
//
// One file (over 500 lines): the command's parts (exit costs, kick->wake,
// start-up and its vCPU sweep, uncontended and contended lock costs) share
// its options, its stop and failure handling and one JSON document, and
// each part prints its own lines; the measuring itself lives below it
// (vmm/bench/, vmm/kvm/startup_floor.h, vmm/lockstat/).
#include <fmt/format.h>

#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "locks/registry.h"
#include "lockvisor/abi/guest_layout.h"
#include "lockvisor/abi/vcpu_runstate.h"
#include "vmm/bench/exit_costs.h"
#include "vmm/bench/release_forms.h"
#include "vmm/bench/startup_vcpus.h"
#include "vmm/cli/bench_knobs.h"
#include "vmm/cli/commands.h"
#include "vmm/cli/option_checks.h"
#include "vmm/experiment/workload_settings.h"
#include "vmm/lockstat/lock_run.h"
#include "vmm/native/native_runner.h"
#include "vmm/guest_image.h"
#include "vmm/host/cpu_set.h"
#include "vmm/host/emulation.h"
#include "vmm/host/open_files.h"
#include "vmm/host/process_memory.h"
#include "vmm/kvm/kvm_system.h"
#include "vmm/kvm/startup_floor.h"
#include "vmm/machine/machine.h"
#include "vmm/metrics/linear_fit.h"
#include "vmm/metrics/summary.h"
#include "vmm/report/run_report.h"
#include "vmm/report/settings_json.h"
#include "vmm/runstate/runstate_pool.h"
#include "vmm/util/error.h"
#include "vmm/util/output_file.h"

namespace lockvisor::cli {
namespace {

struct BenchOptions {
  std::string json;
  std::string image;  // empty: the built-in guest
  unsigned repeat = 10;
  std::uint64_t kick_rounds = 1000;
  unsigned lock_runs = 11;
  bool contended = false;
  bool startup_only = false;
  std::string startup_vcpus = bench::kDefaultStartupVcpus;  // with --startup: the sweep's vCPU counts
  bool startup_vcpus_given = false;                          // the user's list, not the default
  bool cold = false;  // --cold: no pooled run-state program, every run loads its own
  double contended_seconds = 0.5;
  std::uint64_t lock_iterations = 1u << 20;  // 4x the 256K loop of Waiman Long's qspinlock series: steadier medians
};

// A benchmark run stopped by SIGINT/SIGTERM: bench ends with exit code 130.
struct Stopped {};

// The release forms' comparison: 11 interleaved rounds of 4M pairs, about a
// third of a second in all on a 3 GHz CPU.
constexpr unsigned kReleaseFormRounds = 11;
constexpr std::uint64_t kReleaseFormPairs = 1u << 22;

// A benchmark run that did not complete: bench ends with that run's exit code
// (guest fault 3, timeout 4, deadlock 5, host problem 6: README.md, "Exit codes").
struct RunFailed {
  machine::Outcome outcome;
  std::string reason;
};

machine::RunResult boot(const kvm::KvmSystem& kvm, std::span<const std::byte> image, machine::MachineConfig config,
                        std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::now()) {
  config.echo_guest_prints = false;
  if (config.timeout_s == 0) config.timeout_s = 600;
  machine::Machine vm(kvm, std::move(config), image, origin);
  auto result = vm.run();
  switch (result.outcome) {
    case machine::Outcome::kCompleted: return result;
    case machine::Outcome::kInterrupted: throw Stopped{};
    default: throw RunFailed{result.outcome, result.reason};
  }
}

// Picoseconds per uncontended lock/unlock pair, from guest- or host-reported stats.
std::uint64_t ps_per_pair(const abi::WorkloadStats& s) {
  if (s.ops == 0 || s.tsc_khz == 0) fail_guest("uncontended run: no operations or no TSC frequency reported");
  const auto ns = bench::tsc_cycles_to_ns(s.elapsed_cycles, s.tsc_khz);
  return static_cast<std::uint64_t>(static_cast<unsigned __int128>(ns) * 1000 / s.ops);
}

// 5. (--contended) lockbench under overcommit, guest vs native, every lock:
//    throughput and fairness, median of 3 interleaved runs per cell.
void contended_bench(const kvm::KvmSystem& kvm, std::span<const std::byte> image, const BenchOptions& o,
                     nlohmann::json& out) {
  struct Ratio {
    const char* name;
    unsigned cpus;
    std::vector<int> pcpus;
  };
  const auto allowed = host::allowed_cpus();
  std::vector<Ratio> ratios;
  if (allowed.size() >= 2) ratios.push_back({"1:1", 2, {allowed[0], allowed[1]}});
  // 2:1 across both CPUs: parallel contention and time slicing together (4:1
  // on one CPU is time slicing alone).
  if (allowed.size() >= 2) ratios.push_back({"2:1", 4, {allowed[0], allowed[1]}});
  ratios.push_back({"4:1", 4, {allowed[0]}});
  constexpr unsigned kRuns = 3;
  experiment::WorkloadSettings workload;  // lockbench with the defaults run uses
  workload.duration_s = o.contended_seconds;
  fmt::print("lockbench (cs {} ns, delay {} ns, {:.1f} s), ops/s median of {} runs; Jain index in brackets:\n",
             workload.cs_ns, workload.delay_ns, o.contended_seconds, kRuns);
  fmt::print("  {:<12}", "lock");
  for (const auto& r : ratios) fmt::print(" {:>22} {:>22}", fmt::format("guest {}", r.name), fmt::format("native {}", r.name));
  fmt::print("\n");
  for (const auto& lock : locks::kLocks) {
    fmt::print("  {:<12}", lock.name);
    for (const auto& r : ratios) {
      std::vector<std::uint64_t> guest_ops, native_ops;
      std::vector<double> guest_jain, native_jain;
      auto summarize = [](const std::vector<abi::WorkloadStats>& stats, std::vector<std::uint64_t>& ops,
                          std::vector<double>& jain) {
        lockstat::LockRun run;
        for (const auto& s : stats) run.samples.push_back({s, 0, 0, std::nullopt, std::nullopt});
        const auto m = lockstat::to_json(run);
        ops.push_back(static_cast<std::uint64_t>(m["ops_per_sec"].get<double>()));
        jain.push_back(m["fairness"]["jain"].get<double>());
      };
      for (unsigned run = 0; run < kRuns; ++run) {
        workload.lock = lock.name;
        machine::MachineConfig config;
        config.vcpus = r.cpus;
        config.pcpus = r.pcpus;
        config.program = workload.workload;
        const auto params = experiment::workload_params(workload, config.seed, r.cpus);
        config.workload = params;  // the guest runs exactly the native twin's parameters
        summarize(lockstat::workload_stats_from(boot(kvm, image, config)), guest_ops, guest_jain);
        native::NativeRunConfig native_config;
        native_config.lock = lock.name;
        native_config.pcpus = r.pcpus;
        native_config.params = params;
        summarize(native::run_native(native_config), native_ops, native_jain);
      }
      const auto g = *metrics::percentile(guest_ops, 50), n = *metrics::percentile(native_ops, 50);
      std::sort(guest_jain.begin(), guest_jain.end());
      std::sort(native_jain.begin(), native_jain.end());
      fmt::print(" {:>14.0f} [{:.2f}] {:>14.0f} [{:.2f}]", g, guest_jain[kRuns / 2], n, native_jain[kRuns / 2]);
      out["contended"][lock.name][r.name] = {{"guest_ops_per_sec", g}, {"native_ops_per_sec", n},
                                             {"guest_jain", guest_jain[kRuns / 2]},
                                             {"native_jain", native_jain[kRuns / 2]}, {"runs", kRuns}};
      std::fflush(stdout);
    }
    fmt::print("\n");
  }
}

// The whole `lockvisor run` of the empty guest as a user sees it, process
// start to exit (exec, dynamic linking, option parsing, the run, the
// report): wall milliseconds, or nullopt when this binary cannot be re-run.
std::optional<double> empty_process_ms(const std::string& image) {
  std::vector<std::string> args = {"/proc/self/exe", "run", "--workload", "empty", "--vcpus", "1"};
  if (!image.empty()) args.insert(args.end(), {"--image", image});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return std::nullopt;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return ms;
}

// Nearest-rank median (metrics/summary.h's method), of milliseconds or KiB.
double rank_median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[(v.size() + 1) / 2 - 1];
}

// One vCPU count's start-up samples, one per run, ms unless named otherwise.
struct StartupSamples {
  std::map<std::string, std::vector<double>> steps, floor_steps, off_path;
  std::vector<double> entry, exit, total, floor_entry, floor_exit, build_faults, floor_faults;
  // KiB the VMM process grew by: its peak over build and run, and right
  // after the build (before any vCPU ran), resident and proportional; and
  // the host's free memory lost over that build beyond the process's own
  // anonymous growth (kernel_kib).
  std::vector<double> peak_rss_kib, build_rss_kib, build_pss_kib, kernel_kib;
  std::string runstate;
  std::uint64_t memory_mib = 0;  // the runs' --memory
};

// The sweep's vCPU counts (bench::resolve_startup_vcpus; empty: no sweep),
// and whether `limit` was one of them.
struct StartupCounts {
  std::vector<unsigned> vcpus;
  bool limit_listed = false;
};

double kib_growth(std::uint64_t before, std::uint64_t after) {
  return static_cast<double>(after) - static_cast<double>(before);
}

// One run of the floor and one of lockvisor with `config`, the lockvisor
// run timed from opening the device on (the floor opens /dev/kvm inside its
// window too, and a fresh `lockvisor run` pays it); with `memory`, the
// process's peak over that run and a second, untimed build for what the
// build alone leaves (a reading between build and run would sit inside the
// timed window).
void sample_startup(std::span<const std::byte> image, const machine::MachineConfig& config, bool memory,
                    StartupSamples& s) {
  s.memory_mib = config.memory_mib;
  const auto f = kvm::measure_startup_floor(config.memory_mib << 20, config.vcpus);
  s.floor_entry.push_back(f.first_entry);
  s.floor_exit.push_back(f.first_exit);
  s.floor_steps["open"].push_back(f.opened);
  s.floor_steps["vm"].push_back(f.vm_created - f.opened);
  s.floor_steps["memory"].push_back(f.memory - f.vm_created);
  s.floor_steps["vcpus"].push_back(f.vcpus - f.memory);
  s.floor_steps["first_kvm_run"].push_back(f.first_exit - f.first_entry);
  s.floor_faults.push_back(static_cast<double>(f.page_faults));

  std::optional<host::ProcessMemory> before;
  if (memory) {
    host::reset_peak_rss();
    before = host::read_process_memory();
  }
  const auto origin = std::chrono::steady_clock::now();
  const auto device = kvm::KvmSystem::open();
  const auto run = boot(device, image, config, origin);
  const double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - origin).count();
  if (memory) s.peak_rss_kib.push_back(kib_growth(before->rss_kib, host::read_process_memory().peak_rss_kib));
  const auto& m = run.startup;
  s.entry.push_back(run.seconds_to_first_entry * 1e3);
  s.exit.push_back(run.seconds_to_first_exit * 1e3);
  s.total.push_back(wall);
  s.steps["vm"].push_back(m.vm * 1e3);
  // The Machine's build order: VM and RAM, the run-state page, the image
  // (and its boot tables), the vCPUs.
  s.steps["runstate"].push_back((m.runstate - m.vm) * 1e3);
  s.steps["image"].push_back((m.image - m.runstate) * 1e3);
  s.steps["vcpus"].push_back((m.vcpus - m.image) * 1e3);
  s.steps["threads"].push_back((run.seconds_to_first_entry - m.vcpus) * 1e3);
  s.steps["first_kvm_run"].push_back((run.seconds_to_first_exit - run.seconds_to_first_entry) * 1e3);
  s.build_faults.push_back(static_cast<double>(m.build_page_faults));
  // Off the path: when the live run-state page replaced the zeros.
  if (m.runstate_live > 0) s.off_path["runstate_live_at"].push_back(m.runstate_live * 1e3);
  s.runstate = run.runstate;
  if (!memory) return;

  const auto free_before = host::host_free_kib();
  const auto built_before = host::read_process_memory();
  machine::MachineConfig untimed = config;
  untimed.echo_guest_prints = false;
  const machine::Machine vm(device, std::move(untimed), image);
  const auto built = host::read_process_memory();
  const auto free_after = host::host_free_kib();
  s.build_rss_kib.push_back(kib_growth(built_before.rss_kib, built.rss_kib));
  s.build_pss_kib.push_back(kib_growth(built_before.pss_kib, built.pss_kib));
  if (free_before && free_after)
    s.kernel_kib.push_back(kib_growth(*free_after, *free_before) - kib_growth(built_before.anon_kib, built.anon_kib));
}

// 3. start-up of an empty guest (the vCPU count and memory of the defaults
//    but one vCPU), each run beside the bare-KVM floor with the same memory
//    and vCPUs (vmm/kvm/startup_floor.h), interleaved so that noise hits both
//    alike; then the whole empty process.
void print_startup(const StartupSamples& s, const BenchOptions& o, const machine::MachineConfig& base,
                   nlohmann::json& out) {
  std::vector<double> process;
  for (unsigned r = 0; r < o.repeat; ++r) {
    if (const auto ms = empty_process_ms(o.image)) process.push_back(*ms);
  }
  const auto median_of = [](const std::map<std::string, std::vector<double>>& m, const char* key) {
    const auto it = m.find(key);
    return it == m.end() ? 0.0 : rank_median(it->second);
  };
  const double e = rank_median(s.entry), fl = rank_median(s.floor_entry);
  fmt::print("empty guest, {} runs          : first guest instruction {:.2f} ms, first exit {:.2f} ms, total {:.2f} ms "
             "(medians; run-state page {})\n",
             o.repeat, e, rank_median(s.exit), rank_median(s.total), s.runstate);
  fmt::print("  bare-KVM floor, same run     : first guest instruction {:.2f} ms, first exit {:.2f} ms; "
             "lockvisor / floor = {:.2f}\n",
             fl, rank_median(s.floor_exit), fl > 0 ? e / fl : 0.0);
  fmt::print("  lockvisor steps (ms)         : VM+RAM {:.2f}, run-state page {:.2f}, image {:.2f}, vCPUs {:.2f}, "
             "threads to first KVM_RUN {:.2f}, first KVM_RUN {:.2f}\n",
             median_of(s.steps, "vm"), median_of(s.steps, "runstate"), median_of(s.steps, "image"),
             median_of(s.steps, "vcpus"), median_of(s.steps, "threads"), median_of(s.steps, "first_kvm_run"));
  fmt::print("  page faults before KVM_RUN   : lockvisor's build {:.0f}, the floor {:.0f} (medians)\n",
             rank_median(s.build_faults), rank_median(s.floor_faults));
  if (const auto live = s.off_path.find("runstate_live_at"); live != s.off_path.end())
    fmt::print("  off the path                 : run-state page live {:.2f} ms after the start ({} of {} runs)\n",
               rank_median(live->second), live->second.size(), o.repeat);
  if (!process.empty())
    fmt::print("  whole `lockvisor run --workload empty`, process start to exit: {:.2f} ms (median of {})\n",
               rank_median(process), process.size());
  nlohmann::json breakdown, floor_breakdown, off_path_json = nlohmann::json::object();
  for (const auto& [name, values] : s.steps) breakdown[name] = rank_median(values);
  for (const auto& [name, values] : s.floor_steps) floor_breakdown[name] = rank_median(values);
  for (const auto& [name, values] : s.off_path) off_path_json[name] = rank_median(values);
  out["startup_ms"] = {{"first_entry", e},
                       {"first_exit", rank_median(s.exit)},
                       {"total", rank_median(s.total)},
                       {"floor", fl},
                       {"floor_first_exit", rank_median(s.floor_exit)},
                       {"ratio_to_floor", fl > 0 ? e / fl : 0.0},
                       {"breakdown", breakdown},
                       {"floor_breakdown", floor_breakdown},
                       {"off_path", off_path_json},
                       {"page_faults", {{"build", rank_median(s.build_faults)}, {"floor", rank_median(s.floor_faults)}}},
                       {"cold", o.cold},
                       {"empty_process", process.empty() ? nlohmann::json(nullptr) : nlohmann::json(rank_median(process))},
                       {"runstate", s.runstate},
                       {"memory_mib", base.memory_mib},
                       {"vcpus", base.vcpus},
                       {"runs", o.repeat}};
}

// What lockvisor maps for each vCPU, bytes. Virtual sizes: only what is
// touched becomes resident (the sweep's memory figures say how much).
nlohmann::json mapped_per_vcpu(const kvm::KvmSystem& kvm) {
  std::size_t thread_stack = 0;
  pthread_attr_t attr;
  if (::pthread_getattr_default_np(&attr) == 0) {
    ::pthread_attr_getstacksize(&attr, &thread_stack);
    ::pthread_attr_destroy(&attr);
  }
  return {{"kvm_run", kvm.vcpu_mmap_size()},
          {"thread_stack", thread_stack},
          {"guest_stacks", abi::kVcpuStackBlockBytes},
          {"guest_tss", abi::kTssStride},
          {"guest_steal_time", abi::kStealTimeStride},
          {"runstate_record", sizeof(abi::VcpuRunState)}};
}

// The sweep over vCPU counts (--startup-vcpus): the same runs as above at
// each count, the counts interleaved run by run, with memory; then each
// figure's growth per vCPU, the least-squares slope over the counts.
void startup_sweep(const std::map<unsigned, StartupSamples>& samples, const StartupCounts& counts,
                   const BenchOptions& o, const kvm::KvmSystem& kvm, nlohmann::json& out) {
  const kvm::VcpuLimit kvm_limit = kvm.vcpu_limit();
  const unsigned limit = bench::vcpu_limit_here(kvm_limit);
  // One figure per count: its table heading and unit, its JSON names (the
  // median, its slope per vCPU), and the slope's unit per the median's.
  struct Column {
    const char* heading;
    const char* unit;
    const char* key;
    const char* growth;
    double scale;  // ms -> us: 1000
    std::function<double(const StartupSamples&)> value;
  };
  const auto step = [](const char* name, bool floor) {
    return [name, floor](const StartupSamples& s) {
      const auto& m = floor ? s.floor_steps : s.steps;
      const auto it = m.find(name);
      return it == m.end() ? 0.0 : rank_median(it->second);
    };
  };
  const auto of = [](std::vector<double> StartupSamples::*member) {
    return [member](const StartupSamples& s) { return rank_median(s.*member); };
  };
  const std::vector<Column> columns = {
      {"1st instr", "ms", "first_entry_ms", "first_entry_us", 1000, of(&StartupSamples::entry)},
      {"floor", "ms", "floor_first_entry_ms", "floor_first_entry_us", 1000, of(&StartupSamples::floor_entry)},
      {"1st exit", "ms", "first_exit_ms", "first_exit_us", 1000, of(&StartupSamples::exit)},
      {"floor", "ms", "floor_first_exit_ms", "floor_first_exit_us", 1000, of(&StartupSamples::floor_exit)},
      {"vCPU step", "ms", "vcpus_step_ms", "vcpus_step_us", 1000, step("vcpus", false)},
      {"floor", "ms", "floor_vcpus_step_ms", "floor_vcpus_step_us", 1000, step("vcpus", true)},
      {"threads", "ms", "threads_step_ms", "threads_step_us", 1000, step("threads", false)},
      {"peak RSS+", "KiB", "peak_rss_growth_kib", "peak_rss_kib", 1, of(&StartupSamples::peak_rss_kib)},
      {"build RSS+", "KiB", "build_rss_growth_kib", "build_rss_kib", 1, of(&StartupSamples::build_rss_kib)},
      {"build PSS+", "KiB", "build_pss_growth_kib", "build_pss_kib", 1, of(&StartupSamples::build_pss_kib)},
      {"kernel~", "KiB", "host_kernel_kib", "host_kernel_kib", 1, of(&StartupSamples::kernel_kib)},
  };

  fmt::print("start-up and memory by vCPU count ({} runs each, medians; `limit` here is {}: the host KVM allows {} "
             "({}), lockvisor {}):\n",
             o.repeat, limit, kvm_limit.vcpus, kvm_limit.source, abi::kMaxVcpus);
  constexpr int kWidth = 10;
  fmt::print("  {:>9}", "vCPUs");
  for (const auto& c : columns) fmt::print(" {:>{}}", c.heading, kWidth);
  fmt::print("\n  {:>9}", "");
  for (const auto& c : columns) fmt::print(" {:>{}}", c.unit, kWidth);
  fmt::print("\n");
  nlohmann::json points = nlohmann::json::array();
  std::vector<double> x;
  std::map<std::string, std::vector<double>> y;
  for (const unsigned n : counts.vcpus) {
    const StartupSamples& s = samples.at(n);
    const bool is_limit = counts.limit_listed && n == limit;
    nlohmann::json point = {{"vcpus", n}, {"limit", is_limit}, {"memory_mib", s.memory_mib}};
    fmt::print("  {:>9}", is_limit ? fmt::format("{} limit", n) : std::to_string(n));
    for (const auto& c : columns) {
      const double v = c.value(s);
      point[c.key] = v;
      y[c.key].push_back(v);
      fmt::print(" {:>{}.{}f}", v, kWidth, c.scale == 1 ? 0 : 2);
    }
    fmt::print("\n");
    nlohmann::json breakdown, floor_breakdown;
    for (const auto& [name, values] : s.steps) breakdown[name] = rank_median(values);
    for (const auto& [name, values] : s.floor_steps) floor_breakdown[name] = rank_median(values);
    point["breakdown_ms"] = breakdown;
    point["floor_breakdown_ms"] = floor_breakdown;
    point["page_faults"] = {{"build", rank_median(s.build_faults)}, {"floor", rank_median(s.floor_faults)}};
    points.push_back(point);
    x.push_back(n);
  }
  nlohmann::json growth = nlohmann::json::object();
  for (const auto& c : columns) {
    const auto fit = metrics::fit_line(x, y[c.key]);
    growth[c.growth] = fit ? nlohmann::json(fit->slope * c.scale) : nlohmann::json(nullptr);
  }
  const auto mapped = mapped_per_vcpu(kvm);
  if (x.size() >= 2) {
    const auto g = [&growth](const char* key) { return growth[key].get<double>(); };
    fmt::print("  growth per vCPU (least squares over {} counts): first guest instruction {:+.1f} us (floor {:+.1f}), "
               "vCPUs step {:+.1f} us (floor {:+.1f}); peak RSS {:+.1f} KiB, build RSS {:+.1f} KiB, build PSS {:+.1f} "
               "KiB, host kernel ~{:+.1f} KiB\n",
               x.size(), g("first_entry_us"), g("floor_first_entry_us"), g("vcpus_step_us"), g("floor_vcpus_step_us"),
               g("peak_rss_kib"), g("build_rss_kib"), g("build_pss_kib"), g("host_kernel_kib"));
  } else {
    fmt::print("  growth per vCPU: needs two vCPU counts\n");
  }
  fmt::print("  mapped per vCPU: kvm_run {} B (KVM_GET_VCPU_MMAP_SIZE), thread stack {} KiB reserved; in guest RAM "
             "(inside --memory): stacks {} KiB, TSS {} B, steal-time {} B; run-state record {} B\n",
             mapped["kvm_run"].get<int>(), mapped["thread_stack"].get<std::size_t>() / 1024,
             abi::kVcpuStackBlockBytes / 1024, abi::kTssStride, abi::kStealTimeStride, sizeof(abi::VcpuRunState));
  const auto thp = host::transparent_hugepages();
  fmt::print("  peak RSS+: the process's peak over build and run (guest RAM the guest touched included; transparent "
             "huge pages here: {}); build RSS+/PSS+: after the build, before any vCPU runs; kernel~: the host's free "
             "memory lost over that build beyond the process's anonymous growth (whole host: other work shows in "
             "it)\n",
             thp.value_or("unknown"));
  out["startup_by_vcpus"] = {{"points", points},
                             {"growth_per_vcpu", growth},
                             {"growth_method", fmt::format("least-squares slope over {} vCPU counts", x.size())},
                             {"mapped_per_vcpu_bytes", mapped},
                             {"vcpu_limit", {{"here", limit},
                                             {"kvm", kvm_limit.vcpus},
                                             {"kvm_source", kvm_limit.source},
                                             {"lockvisor", abi::kMaxVcpus}}},
                             {"memory_mib", machine::MachineConfig{}.memory_mib},  // the default; each point has its own
                             {"transparent_hugepages", thp ? nlohmann::json(*thp) : nlohmann::json(nullptr)},
                             {"cold", o.cold},
                             {"runs", o.repeat}};
}

// Start-up: the 1-vCPU figures (section 3), and with --startup the sweep
// over --startup-vcpus; every count's runs interleaved with the others'.
void startup_bench(std::span<const std::byte> image, const BenchOptions& o, const kvm::KvmSystem& kvm,
                   const StartupCounts& counts, nlohmann::json& out) {
  machine::MachineConfig base;
  base.vcpus = 1;
  base.program = "empty";
  // Before any run starts a loader thread (which reads the variable), and
  // inherited by the empty processes (print_startup).
  if (o.cold) ::setenv(runstate::kPoolVariable, "off", 1);
  std::vector<unsigned> measured = counts.vcpus;
  if (std::find(measured.begin(), measured.end(), base.vcpus) == measured.end())
    measured.insert(measured.begin(), base.vcpus);
  std::map<unsigned, StartupSamples> samples;
  // The floor creates its vCPUs before any lockvisor VM raises the limit.
  const unsigned most = *std::max_element(measured.begin(), measured.end());
  host::make_room_for_files(machine::files_for_vcpus(most), fmt::format("--startup-vcpus {}", most));
  for (unsigned r = 0; r < o.repeat; ++r)
    for (const unsigned n : measured) {
      machine::MachineConfig config = base;
      config.vcpus = n;
      // The default --memory, or what n vCPUs' stacks need where that is more
      // (1024 vCPUs take 128 MiB of stacks): a run refuses less.
      config.memory_mib = std::max(base.memory_mib, machine::minimum_memory_mib(n, image));
      sample_startup(image, config, !counts.vcpus.empty(), samples[n]);
    }
  print_startup(samples[base.vcpus], o, base, out);
  if (!counts.vcpus.empty()) startup_sweep(samples, counts, o, kvm, out);
}

int bench_all(const BenchOptions& o) {
  const auto listed = bench::parse_startup_vcpus(o.startup_vcpus);  // checked before the KVM device is opened
  std::optional<OutputFile> json;  // checked before anything runs, not after
  if (!o.json.empty()) json.emplace(o.json, "--json");
  std::vector<std::byte> storage;
  const auto image = select_guest_image(o.image, storage);
  machine::validate_image(machine::MachineConfig{}, image);  // --image /bin/ls: one line, exit 2, before KVM
  const auto kvm = kvm::KvmSystem::open();
  StartupCounts counts;  // a count above the host KVM's limit is refused here, before anything runs
  if (o.startup_only)
    counts = {bench::resolve_startup_vcpus(listed, kvm.vcpu_limit(),
                                           o.startup_vcpus_given ? bench::AboveLimit::kRefuse
                                                                 : bench::AboveLimit::kLeaveOut),
              listed.limit};
  nlohmann::json out;
  out["kvm"] = kvm::backend_name(kvm::detect_backend());
  out["settings"] = report::settings_json(machine::MachineConfig{});  // bench runs with the defaults
  out["host"] = host::emulation_json(host::emulation());
  fmt::print("lockvisor bench on KVM {}, {} host CPUs\n", out["kvm"].get<std::string>(), host::host_cpu_count());
  host::print_emulation_warning(stdout);
  if (o.startup_only) {
    startup_bench(image, o, kvm, counts, out);
    if (json) report::write_json_file(*json, out);
    return 0;
  }

  const bench::BootFn boot_fn = [&](machine::MachineConfig config) { return boot(kvm, image, std::move(config)); };
  {  // 1. doorbell hypercall vs bare PIO exit, interleaved batches in one guest
    const auto costs = bench::measure_exit_costs(boot_fn);
    const auto& doorbell = costs.doorbell_ns;
    const auto& bare = costs.bare_exit_ns;
    fmt::print("doorbell hypercall round trip : median {:8.2f} us  (bare PIO exit {:8.2f} us, ratio {:.2f})\n",
               doorbell.p50 / 1000, bare.p50 / 1000, doorbell.p50 / bare.p50);
    out["doorbell_ns"] = {{"median", doorbell.p50}, {"p99", doorbell.p99}, {"batches", doorbell.count}};
    out["bare_pio_exit_ns"] = {{"median", bare.p50}, {"p99", bare.p99}, {"batches", bare.count}};
    out["doorbell_over_bare_ratio"] = doorbell.p50 / bare.p50;
  }

  // 2. kick->wake latency: both vCPUs on one host CPU, one per CPU, floating.
  struct Placement {
    const char* name;
    std::vector<int> pcpus;
    machine::PinPolicy pin;
  };
  const auto allowed = host::allowed_cpus();
  std::vector<Placement> placements = {{"same-cpu", {allowed.front()}, machine::PinPolicy::kSpread}};
  if (allowed.size() >= 2) {
    placements.push_back({"pinned-apart", {allowed[0], allowed[1]}, machine::PinPolicy::kSpread});
    placements.push_back({"unpinned", {}, machine::PinPolicy::kFloat});
  }
  for (const auto& p : placements) {
    const auto kick = bench::measure_kick_wake(boot_fn, p.pcpus, p.pin, o.kick_rounds);
    const auto& guest = kick.guest_ns;
    const auto& vmm = kick.vmm;
    fmt::print("kick->wake {:<13}      : median {:8.2f} us, p99 {:8.2f} us (guest clock); VMM wake median {:.2f} us\n",
               p.name, guest.p50 / 1000, guest.p99 / 1000, vmm["p50"].get<double>() / 1000);
    out["kick_wake_ns"][p.name] = {{"median", guest.p50}, {"p99", guest.p99}, {"rounds", guest.count},
                                   {"vmm_median", vmm["p50"]}, {"vmm_p99", vmm["p99"]}};
  }

  startup_bench(image, o, kvm, {}, out);
  {  // 4. uncontended lock/unlock: the same code in the guest and on a host thread,
     //    runs interleaved (guest, native, guest, ...) so that noise hits both alike.
    fmt::print("uncontended lock/unlock, {} pairs, median of {} runs each (guest CPL3 vs native host thread):\n",
               o.lock_iterations, o.lock_runs);
    fmt::print("  {:<12} {:>10} {:>10} {:>8}\n", "lock", "guest ns", "native ns", "ratio");
    for (const auto& lock : locks::kLocks) {
      std::vector<std::uint64_t> guest_ps, native_ps;  // picoseconds per pair
      for (unsigned r = 0; r < o.lock_runs; ++r) {
        experiment::WorkloadSettings uncontended;
        uncontended.workload = "uncontended";
        uncontended.lock = lock.name;
        uncontended.iterations = o.lock_iterations;
        machine::MachineConfig config;
        config.vcpus = 1;
        config.program = uncontended.workload;
        const auto params = experiment::workload_params(uncontended, config.seed, 1);
        config.workload = params;
        const auto run = boot(kvm, image, config);
        const auto stats = lockstat::workload_stats_from(run);
        guest_ps.push_back(ps_per_pair(stats.at(0)));

        native::NativeRunConfig native_config;
        native_config.lock = lock.name;
        native_config.params = params;
        const auto native_stats = native::run_native(native_config);
        native_ps.push_back(ps_per_pair(native_stats.at(0)));
      }
      const double guest_ns = *metrics::percentile(guest_ps, 50) / 1000.0;
      const double native_ns = *metrics::percentile(native_ps, 50) / 1000.0;
      fmt::print("  {:<12} {:>10.2f} {:>10.2f} {:>8.3f}\n", lock.name, guest_ns, native_ns, guest_ns / native_ns);
      out["uncontended_ns"][lock.name] = {{"guest", guest_ns}, {"native", native_ns}, {"ratio", guest_ns / native_ns},
                                          {"runs", o.lock_runs}, {"iterations", o.lock_iterations}};
    }
    // Why the locks that release with a byte store differ from CPU to CPU
    // here (bench/release_forms.h): the three release forms side by side.
    const auto forms = bench::measure_release_forms(host::allowed_cpus().front(), kReleaseFormRounds, kReleaseFormPairs);
    fmt::print("release forms, taken again at once (host thread, median of {} x {} pairs): byte store {:.2f} ns "
               "(qspinlock, pvbounded timed), locked and {:.2f} ns (pvbounded kicked), word store {:.2f} ns (tas)\n",
               forms.rounds, forms.pairs, forms.byte_store_ns, forms.locked_and_ns, forms.word_store_ns);
    out["release_forms_ns"] = {{"byte_store", forms.byte_store_ns}, {"locked_and", forms.locked_and_ns},
                               {"word_store", forms.word_store_ns}, {"rounds", forms.rounds}, {"pairs", forms.pairs}};
  }
  if (o.contended) contended_bench(kvm, image, o, out);
  if (json) report::write_json_file(*json, out);
  return 0;
}

int bench(const BenchOptions& o) {
  try {
    return bench_all(o);
  } catch (const Stopped&) {
    fmt::print(stderr, "lockvisor bench: stopped by SIGINT/SIGTERM\n");
    return machine::exit_code(machine::Outcome::kInterrupted);
  } catch (const RunFailed& failed) {
    fmt::print(stderr, "lockvisor: error: benchmark run failed: {}: {}\n", machine::outcome_name(failed.outcome),
               failed.reason);
    return machine::exit_code(failed.outcome);
  }
}

}  // namespace

Action add_bench_command(CLI::App& app) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* command = app.add_subcommand("bench", "Measure doorbell, kick->wake and start-up costs");
  command->add_option("--json", options->json,
                      "Write the results as JSON to FILE"
                      " (absent or a regular file, checked first; replaced atomically)");
  command->add_option("--image", options->image, "Guest ELF image (default: the built-in one)");
  command->add_option("--repeat", options->repeat, "Start-up measurements to take (1..10000)")
      ->transform(unsigned_in(1, 10000));
  command->add_option("--kick-rounds", options->kick_rounds, "Kick->wake rounds per placement (1..4096)")
      ->transform(unsigned_in(1, 4096));
  auto* startup = command->add_flag(
      "--startup", options->startup_only,
      "Measure only the start-up (beside the bare-KVM floor) and the whole empty run, then start-up and memory at "
      "each --startup-vcpus count with their growth per vCPU");
  auto* startup_vcpus =
      command
          ->add_option("--startup-vcpus", options->startup_vcpus,
                       fmt::format("With --startup: the vCPU counts to measure, comma-separated, each 1..{} or '{}' "
                                   "(the most this host's KVM and lockvisor allow); a count above the host KVM's "
                                   "limit is refused (the default's are left out)",
                                   abi::kMaxVcpus, bench::kVcpuLimitWord))
      ->type_name("LIST")
      ->default_str(bench::kDefaultStartupVcpus)
      ->needs(startup);
  command->add_flag("--cold", options->cold,
                    "Start-up as after a reboot or a new build: every run loads its own run-state program "
                    "(LOCKVISOR_RUNSTATE_PIN=off) instead of leasing a pinned one");
  command->add_flag("--contended", options->contended, "Also run lockbench at 1:1, 2:1 (both CPUs) and 4:1 (one CPU), guest vs native, every lock");
  command->add_option("--contended-seconds", options->contended_seconds, "Length of each --contended run (0.001..3600 s)")
      ->check(seconds_in(0.001, 3600));
  command->add_option("--lock-runs", options->lock_runs, "Uncontended runs per lock, guest and native each (1..1000)")
      ->transform(unsigned_in(1, 1000));
  command->add_option("--lock-iterations", options->lock_iterations, "Lock/unlock pairs per uncontended run, up to 10^10")
      ->transform(unsigned_in(1, 10000000000));
  auto knobs = add_knobs_bench_options(*command);
  // The three modes measure different things; an option of one mode given to
  // another would be silently ignored, so the combinations are refused.
  CLI::Option* knobs_flag = command->get_option("--knobs");
  for (const char* other : {"--startup", "--contended", "--contended-seconds", "--repeat", "--kick-rounds", "--cold",
                            "--lock-runs", "--lock-iterations", "--image"})
    knobs_flag->excludes(command->get_option(other));
  for (const char* other : {"--contended", "--contended-seconds", "--kick-rounds", "--lock-runs", "--lock-iterations"})
    startup->excludes(command->get_option(other));
  command->get_option("--contended-seconds")->needs(command->get_option("--contended"));
  return [options, knobs, startup_vcpus] {
    knobs->json = options->json;
    options->startup_vcpus_given = startup_vcpus->count() > 0;
    return knobs->enabled ? run_knobs_bench(*knobs) : bench(*options);
  };
}

}  // namespace lockvisor::cli
