#include "vmm/machine/machine.h"

#include <signal.h>
#include <sys/ioctl.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lockvisor/abi/boot_info.h"
#include "lockvisor/abi/guest_layout.h"
#include "vmm/host/cpu_set.h"
#include "vmm/kvm/vm.h"
#include "vmm/loader/elf_loader.h"
#include "vmm/machine/serial_console.h"
#include "vmm/machine/vcpu_runner.h"
#include "vmm/machine/x86_boot.h"
#include "vmm/pvlock/userspace_backend.h"
#include "vmm/util/error.h"

namespace lockvisor::machine {
namespace abi = lockvisor::abi;
namespace {

constexpr std::uint64_t kTwoMiB = 2u << 20;
std::uint64_t align_up(std::uint64_t value, std::uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

// A short reference measurement when KVM cannot tell the TSC frequency.
std::uint64_t calibrate_tsc_khz() {
  const auto t0 = std::chrono::steady_clock::now();
  const std::uint64_t c0 = __builtin_ia32_rdtsc();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const std::uint64_t c1 = __builtin_ia32_rdtsc();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<std::uint64_t>(static_cast<double>(c1 - c0) / seconds / 1000.0);
}

}  // namespace

void validate_config(const MachineConfig& config) {
  if (config.vcpus < 1 || config.vcpus > abi::kMaxVcpus)
    fail("--vcpus {}: must be between 1 and {}", config.vcpus, abi::kMaxVcpus);
  if (config.memory_mib < 2 || config.memory_mib % 2 != 0 || (config.memory_mib << 20) > abi::kMaxMemoryBytes)
    fail("--memory {}: must be an even number of MiB between 2 and {}", config.memory_mib, abi::kMaxMemoryBytes >> 20);
  if (config.program.size() >= abi::kProgramNameBytes) fail("workload name '{}' is too long", config.program);
  if (config.args.size() >= abi::kProgramArgsBytes)
    fail("workload parameters are too long ({} bytes, at most {})", config.args.size(), abi::kProgramArgsBytes - 1);
  if (config.sbi_experimental_eid < abi::kSbiExperimentalFirst || config.sbi_experimental_eid > abi::kSbiExperimentalLast)
    fail("--sbi-eid {:#x}: must be in the experimental range 0x08000000-0x08ffffff", config.sbi_experimental_eid);
  if (config.timeout_s < 0) fail("--timeout must not be negative");
  if (!config.pcpus.empty()) host::validate_cpus(config.pcpus);
}

void validate_image(const MachineConfig& config, std::span<const std::byte> image) {
  // Load into scratch memory the size of the image window: every check the
  // real load makes, before any KVM object exists.
  std::vector<std::byte> scratch(abi::kImageLimit);
  const auto loaded = vmm::load_elf_image(image, scratch, abi::kImageBase, abi::kImageLimit);
  const std::uint64_t needed = minimum_memory_mib(config.vcpus, loaded.end_gpa);
  if (config.memory_mib < needed)
    fail("--memory {} MiB is too small for this image and {} vCPUs (need at least {} MiB)", config.memory_mib,
         config.vcpus, needed);
}

std::uint64_t minimum_memory_mib(unsigned vcpus, std::uint64_t image_end) {
  // The image, one free 2 MiB page for guest data, and the stacks.
  const std::uint64_t bytes = align_up(image_end, kTwoMiB) + kTwoMiB + vcpus * abi::kVcpuStackBlockBytes;
  return align_up(bytes, kTwoMiB) >> 20;
}

struct Machine::State {
  State(const kvm::KvmSystem& kvm, MachineConfig cfg, std::chrono::steady_clock::time_point origin_time)
      : config(std::move(cfg)),
        origin(origin_time),
        backend(config.vcpus, config.backend),
        serial(config.capture_serial ? SerialConsole(SerialConsole::Capture{}, config.vcpus)
                                     : SerialConsole(config.serial_path, config.vcpus)),
        control(config, backend, serial, origin),
        vm(kvm, config.memory_mib << 20) {}

  MachineConfig config;
  std::chrono::steady_clock::time_point origin;
  pvlock::UserspaceBackend backend;
  SerialConsole serial;
  RunControl control;
  kvm::Vm vm;
  std::vector<std::unique_ptr<VcpuRunner>> vcpus;
  std::uint64_t tsc_khz = 0;
  std::string kvm_kind;

  std::vector<std::string> vcpu_state_lines() const;
  bool deadlocked() const;
};

Machine::Machine(const kvm::KvmSystem& kvm, MachineConfig config, std::span<const std::byte> image,
                 std::chrono::steady_clock::time_point origin) {
  validate_config(config);
  kvm.require_extension(KVM_CAP_SYNC_REGS, "KVM_CAP_SYNC_REGS");
  kvm.require_extension(KVM_CAP_IMMEDIATE_EXIT, "KVM_CAP_IMMEDIATE_EXIT");
  state_ = std::make_unique<State>(kvm, std::move(config), origin);
  State& s = *state_;
  const MachineConfig& cfg = s.config;
  const std::uint64_t bytes = cfg.memory_mib << 20;
  auto& memory = s.vm.memory();

  const std::uint64_t stacks = stacks_bottom(bytes, cfg.vcpus);
  if (stacks <= abi::kImageBase) fail("--memory {} MiB is too small for {} vCPU stacks", cfg.memory_mib, cfg.vcpus);
  const auto loaded = vmm::load_elf_image(image, memory.all(), abi::kImageBase, std::min(abi::kImageLimit, stacks));
  const std::uint64_t free_start = align_up(loaded.end_gpa, kTwoMiB);
  if (free_start + kTwoMiB > stacks)
    fail("--memory {} MiB is too small for this image and {} vCPUs (need at least {} MiB)", cfg.memory_mib, cfg.vcpus,
         minimum_memory_mib(cfg.vcpus, loaded.end_gpa));

  write_boot_tables(memory, cfg.vcpus);

  auto* boot = memory.at<abi::BootInfo>(abi::kBootInfoAddr);
  boot->magic = abi::kBootInfoMagic;
  boot->version = abi::kBootInfoVersion;
  boot->size = sizeof(abi::BootInfo);
  boot->vcpu_count = cfg.vcpus;
  boot->flags = (cfg.pv_unhalt ? abi::kBootFlagPvUnhalt : 0) | (cfg.sbi_pvlock ? abi::kBootFlagSbiPvlock : 0) |
                (cfg.dedicated_hint ? abi::kBootFlagDedicated : 0);
  boot->memory_bytes = bytes;
  boot->free_start = free_start;
  boot->free_end = stacks;
  boot->seed = cfg.seed;
  boot->sbi_experimental_eid = cfg.sbi_experimental_eid;
  std::memcpy(boot->program, cfg.program.c_str(), cfg.program.size() + 1);
  std::memcpy(boot->args, cfg.args.c_str(), cfg.args.size() + 1);

  const auto supported = kvm.supported_cpuid();
  const CpuidOptions cpuid_options{cfg.pv_unhalt, cfg.dedicated_hint};
  install_vcpu_interrupt_signal();
  for (unsigned i = 0; i < cfg.vcpus; ++i) {
    const unsigned apic_id = i;  // APIC ID == index, but every lookup goes through the map
    kvm::Vcpu vcpu = s.vm.create_vcpu(i, apic_id);
    vcpu.set_cpuid(guest_cpuid(supported, apic_id, cpuid_options));
    vcpu.set_sregs(boot_sregs(vcpu.sregs(), i));
    vcpu.set_regs(boot_regs(loaded.entry, bytes, i));
    if (i == 0) {
      const int khz = ::ioctl(vcpu.fd(), KVM_GET_TSC_KHZ, 0);
      s.tsc_khz = khz > 0 ? static_cast<std::uint64_t>(khz) : calibrate_tsc_khz();
    }
    boot->vcpus[i] = {apic_id, 0, kernel_stack_top(bytes, i), user_stack_top(bytes, i)};
    s.control.map_apic(apic_id, i);
    s.vcpus.push_back(std::make_unique<VcpuRunner>(std::move(vcpu), apic_id, memory, s.control));
  }
  boot->tsc_khz = s.tsc_khz;
  s.kvm_kind = kvm::backend_name(kvm::detect_backend());
  spdlog::debug("VM ready: {} vCPUs, {} MiB, image entry {:#x}, image end {:#x}, TSC {} kHz, KVM {}", cfg.vcpus,
                cfg.memory_mib, loaded.entry, loaded.end_gpa, s.tsc_khz, s.kvm_kind);
}

Machine::~Machine() = default;

std::vector<std::string> Machine::State::vcpu_state_lines() const {
  std::vector<std::string> lines;
  for (const auto& v : vcpus) {
    const auto latch = backend.latch_state(v->index());
    const bool halted = (latch & pvlock::KickLatch::kHalted) != 0;
    const char* state = v->finished() ? vcpu_state_name(v->state()) : (halted ? "halted" : "running");
    lines.push_back(fmt::format("vCPU {}: {}, kick {}, last hypercall {:#x}, RIP {:#x}", v->index(), state,
                                (latch & pvlock::KickLatch::kPending) ? "pending" : "not pending",
                                v->last_hypercall(), v->rip()));
  }
  return lines;
}

// Every vCPU still in the game is halted with no kick pending, and nothing
// changed while we looked (the backend's epoch): no one is left to kick.
bool Machine::State::deadlocked() const {
  const std::uint64_t before = backend.epoch();
  bool any_halted = false;
  for (const auto& v : vcpus) {
    if (v->finished()) continue;
    const auto latch = backend.latch_state(v->index());
    if (!(latch & pvlock::KickLatch::kHalted) || (latch & pvlock::KickLatch::kPending)) return false;
    any_halted = true;
  }
  return any_halted && backend.epoch() == before;
}

RunResult Machine::run() {
  State& s = *state_;
  namespace asio = boost::asio;
  asio::io_context io;

  s.control.set_stop_hook([&s] {
    s.backend.stop();
    for (auto& v : s.vcpus) v->interrupt();
  });

  // vCPU threads must not take SIGINT/SIGTERM: those belong to the monitor.
  sigset_t blocked, previous;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGINT);
  sigaddset(&blocked, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &blocked, &previous);

  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int number) {
    if (!ec) s.control.end(Outcome::kInterrupted, fmt::format("stopped by {}", number == SIGINT ? "SIGINT" : "SIGTERM"));
  });

  std::size_t finished = 0;
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < s.vcpus.size(); ++i) {
    auto& v = *s.vcpus[i];
    v.on_finished = [&io, &finished, &s] {
      asio::post(io, [&io, &finished, &s] {
        if (++finished == s.vcpus.size()) io.stop();
      });
    };
    std::vector<int> affinity;
    if (!s.config.pcpus.empty()) {
      if (s.config.pin == PinPolicy::kSpread)
        affinity = {s.config.pcpus[i % s.config.pcpus.size()]};
      else
        affinity = s.config.pcpus;
    }
    v.start(std::move(affinity));
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);

  asio::steady_timer watchdog(io);
  if (s.config.timeout_s > 0) {
    watchdog.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(s.config.timeout_s)));
    watchdog.async_wait([&](const boost::system::error_code& ec) {
      if (!ec)
        s.control.end(Outcome::kTimeout, fmt::format("watchdog: the guest did not finish within {} s", s.config.timeout_s),
                      s.vcpu_state_lines());
    });
  }

  // Deadlock detector; after the outcome is decided it keeps re-interrupting
  // vCPUs until every thread has left, so no thread can be left in KVM_RUN.
  asio::steady_timer ticker(io);
  std::function<void(const boost::system::error_code&)> tick = [&](const boost::system::error_code& ec) {
    if (ec) return;
    if (s.control.decided()) {
      for (auto& v : s.vcpus) v->interrupt();
    } else if (s.deadlocked()) {
      auto lines = s.vcpu_state_lines();
      s.control.end(Outcome::kDeadlock,
                    "deadlock: every vCPU is halted with no kick pending, so none can ever be woken (a lost wakeup?)",
                    std::move(lines));
    }
    ticker.expires_after(std::chrono::milliseconds(s.config.deadlock_check_ms));
    ticker.async_wait(tick);
  };
  ticker.expires_after(std::chrono::milliseconds(s.config.deadlock_check_ms));
  ticker.async_wait(tick);

  io.run();
  for (auto& v : s.vcpus) v->join();
  spdlog::debug("run ended: {}", s.control.decided() ? s.control.reason() : "every vCPU finished");
  s.serial.flush_all();

  RunResult result;
  result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.seconds_to_first_entry = s.control.seconds_to_first_entry();
  result.seconds_to_first_exit = s.control.seconds_to_first_exit();
  result.backend = std::string(s.backend.name());
  result.kvm_kind = s.kvm_kind;
  result.tsc_khz = s.tsc_khz;
  for (const auto& v : s.vcpus) result.vcpus.push_back(v->report());
  result.guest_prints = s.control.prints();
  result.serial_lines = s.serial.captured();
  if (s.control.decided()) {
    result.outcome = s.control.outcome();
    result.reason = s.control.reason();
    result.details = s.control.details();
  } else {
    result.outcome = Outcome::kCompleted;
    result.reason = "every vCPU finished its program";
  }
  return result;
}

}  // namespace lockvisor::machine
