// A static riscv64 program for the nested RISC-V machine (run.sh) that proves
// the transport lockvisor's RISC-V guest will use for SBI PVLOCK: a VS-mode
// guest's `ecall` with the experimental-range alias EID reaches userspace as
// KVM_EXIT_RISCV_SBI and resumes with the VMM's sbiret, while the proposal's
// own EID is answered "not supported" inside a stock kernel, with no exit.
//
// The guest, at kGuestBase, makes three calls and stores what each returned:
//   1. KICK_CPU at the alias EID, a0 = kKickHart      -> exits; the probe
//      answers kAliasRet and checks a0/a1 in memory afterwards
//   2. KICK_CPU at EID "PVLK" (0x50564C4B)             -> no exit, a0 = -2
//   3. an ecall at kDoneEid                           -> exits: the end
// One line per check on stdout; exit status 0 only when every check holds.
//
// --expect-forwarded turns the second expectation round: for a host kernel
// patched to forward EID "PVLK" to userspace, that call must exit too (on a
// stock kernel this mode fails, which is also how run.sh's handling of a
// failing command is checked).
#include <cerrno>
#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <linux/kvm.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include "guest/linux/unique_fd.h"
#include "lockvisor/abi/sbi_pvlock.h"

namespace {

namespace abi = lockvisor::abi;
using lockvisor::linux_init::UniqueFd;

constexpr std::uint64_t kGuestBase = 0x80000000;
constexpr std::size_t kGuestSize = 1 << 20;
// Where the guest stores its results, as offsets from kGuestBase (within a
// store's 12-bit signed immediate, past the code).
constexpr std::int32_t kAliasA0Offset = 0x400;
constexpr std::int32_t kAliasA1Offset = 0x408;
constexpr std::int32_t kPvlkA0Offset = 0x410;
constexpr std::int64_t kKickHart = 3;
// What the probe answers to the forwarded kick: distinct from anything the
// kernel would put in a0/a1, so seeing them proves the sbiret came through.
constexpr std::int64_t kAliasRet[2] = {abi::kSbiSuccess, 0x5a5a};
// The call that ends the guest: the last EID of the forwarded range.
constexpr std::uint32_t kDoneEid = abi::kSbiExperimentalLast;
constexpr int kMaxRuns = 16;

// A shared anonymous mapping, unmapped when it goes out of scope.
class Mapping {
 public:
  Mapping(std::size_t size, int fd) : size_(size) {
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, fd < 0 ? MAP_SHARED | MAP_ANONYMOUS : MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) data_ = p;
  }
  ~Mapping() {
    if (data_) ::munmap(data_, size_);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  explicit operator bool() const { return data_ != nullptr; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  std::size_t size_;
  void* data_ = nullptr;
};

// RV64 instruction encodings (the unprivileged ISA, "RV32I Base Integer
// Instruction Set" formats), for the handful the guest needs.
enum Reg : std::uint32_t { kZero = 0, kT0 = 5, kA0 = 10, kA1 = 11, kA6 = 16, kA7 = 17 };
std::uint32_t auipc(Reg rd, std::uint32_t imm20) { return (imm20 << 12) | (rd << 7) | 0x17; }
std::uint32_t lui(Reg rd, std::uint32_t imm20) { return (imm20 << 12) | (rd << 7) | 0x37; }
std::uint32_t addi(Reg rd, Reg rs1, std::int32_t imm12) {
  return (static_cast<std::uint32_t>(imm12 & 0xfff) << 20) | (rs1 << 15) | (rd << 7) | 0x13;
}
std::uint32_t sd(Reg rs2, Reg rs1, std::int32_t imm12) {
  const auto imm = static_cast<std::uint32_t>(imm12 & 0xfff);
  return ((imm >> 5) << 25) | (rs2 << 20) | (rs1 << 15) | (3u << 12) | ((imm & 0x1f) << 7) | 0x23;
}
constexpr std::uint32_t kEcall = 0x00000073;
constexpr std::uint32_t kJumpToSelf = 0x0000006f;  // jal zero, 0

// `li rd, value` for 0 <= value < 2^31: lui of the upper 20 bits, rounded so
// that the sign-extended addi of the lower 12 bits lands on value.
void load_immediate(std::vector<std::uint32_t>& code, Reg rd, std::uint32_t value) {
  const std::uint32_t upper = (value + 0x800) >> 12;
  const auto lower = static_cast<std::int32_t>(value - (upper << 12));
  code.push_back(lui(rd, upper));
  code.push_back(addi(rd, rd, lower));
}

void sbi_call(std::vector<std::uint32_t>& code, std::uint32_t eid, std::uint32_t fid, std::int32_t a0) {
  load_immediate(code, kA7, eid);
  code.push_back(addi(kA6, kZero, static_cast<std::int32_t>(fid)));
  code.push_back(addi(kA0, kZero, a0));
  code.push_back(kEcall);
}

std::vector<std::uint32_t> guest_code() {
  std::vector<std::uint32_t> code;
  code.push_back(auipc(kT0, 0));  // t0 = kGuestBase: the base of every store
  sbi_call(code, abi::kSbiExtPvlockExperimentalDefault, abi::kSbiPvlockKickCpu, kKickHart);
  code.push_back(sd(kA0, kT0, kAliasA0Offset));
  code.push_back(sd(kA1, kT0, kAliasA1Offset));
  sbi_call(code, abi::kSbiExtPvlock, abi::kSbiPvlockKickCpu, kKickHart);
  code.push_back(sd(kA0, kT0, kPvlkA0Offset));
  sbi_call(code, kDoneEid, 0, 0);
  code.push_back(kJumpToSelf);
  return code;
}

int g_failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAIL", what.c_str());
  if (!ok) ++g_failures;
}

std::string hex(std::uint64_t v) {
  char text[32];
  std::snprintf(text, sizeof text, "%#" PRIx64, v);
  return text;
}

std::string errno_text() { return std::strerror(errno); }

// KVM_RUN until an exit other than an interrupted run; false when the ioctl fails.
bool run_vcpu(int vcpu) {
  for (int i = 0; i < kMaxRuns; ++i) {
    if (::ioctl(vcpu, KVM_RUN, 0) == 0) return true;
    if (errno != EINTR) return false;
  }
  return false;
}

std::string describe_exit(const kvm_run* run) {
  if (run->exit_reason != KVM_EXIT_RISCV_SBI) return "exit reason " + std::to_string(run->exit_reason);
  return "KVM_EXIT_RISCV_SBI eid " + hex(run->riscv_sbi.extension_id) + " fid " +
         std::to_string(run->riscv_sbi.function_id) + " a0 " + std::to_string(run->riscv_sbi.args[0]);
}

bool is_sbi_exit(const kvm_run* run, std::uint64_t eid) {
  return run->exit_reason == KVM_EXIT_RISCV_SBI && run->riscv_sbi.extension_id == eid;
}

int probe(bool expect_forwarded) {
  UniqueFd kvm(::open("/dev/kvm", O_RDWR | O_CLOEXEC));
  check(static_cast<bool>(kvm), "open /dev/kvm" + (kvm ? std::string() : ": " + errno_text()));
  if (!kvm) return 1;
  const int api = ::ioctl(kvm.get(), KVM_GET_API_VERSION, 0);
  check(api == KVM_API_VERSION, "KVM_GET_API_VERSION is " + std::to_string(api) + " (want " +
                                    std::to_string(KVM_API_VERSION) + ")");
  const int max_vcpus = ::ioctl(kvm.get(), KVM_CHECK_EXTENSION, KVM_CAP_MAX_VCPUS);
  check(max_vcpus >= 1, "KVM_CAP_MAX_VCPUS is " + std::to_string(max_vcpus));

  UniqueFd vm(::ioctl(kvm.get(), KVM_CREATE_VM, 0));
  check(static_cast<bool>(vm), "KVM_CREATE_VM" + (vm ? std::string() : ": " + errno_text()));
  if (!vm) return 1;
  Mapping memory(kGuestSize, -1);
  if (!memory) {
    check(false, "mmap of guest memory: " + errno_text());
    return 1;
  }
  const auto code = guest_code();
  std::memcpy(memory.as<char>(), code.data(), code.size() * sizeof code[0]);
  const kvm_userspace_memory_region region{
      .slot = 0,
      .flags = 0,
      .guest_phys_addr = kGuestBase,
      .memory_size = kGuestSize,
      .userspace_addr = reinterpret_cast<std::uint64_t>(memory.as<char>()),
  };
  const bool slot_ok = ::ioctl(vm.get(), KVM_SET_USER_MEMORY_REGION, &region) == 0;
  check(slot_ok, "memory slot at " + hex(kGuestBase) + (slot_ok ? std::string() : ": " + errno_text()));
  if (!slot_ok) return 1;

  UniqueFd vcpu(::ioctl(vm.get(), KVM_CREATE_VCPU, 0));
  const int run_size = ::ioctl(kvm.get(), KVM_GET_VCPU_MMAP_SIZE, 0);
  check(vcpu && run_size > 0, "KVM_CREATE_VCPU" + (vcpu && run_size > 0 ? std::string() : ": " + errno_text()));
  if (!vcpu || run_size <= 0) return 1;
  Mapping run_map(static_cast<std::size_t>(run_size), vcpu.get());
  if (!run_map) {
    check(false, "mmap of kvm_run: " + errno_text());
    return 1;
  }
  auto* run = run_map.as<kvm_run>();
  std::uint64_t pc = kGuestBase;
  const kvm_one_reg pc_reg{.id = KVM_REG_RISCV | KVM_REG_SIZE_U64 | KVM_REG_RISCV_CORE | KVM_REG_RISCV_CORE_REG(regs.pc),
                           .addr = reinterpret_cast<std::uint64_t>(&pc)};
  const bool pc_ok = ::ioctl(vcpu.get(), KVM_SET_ONE_REG, &pc_reg) == 0;
  check(pc_ok, "pc set to " + hex(kGuestBase) + (pc_ok ? std::string() : ": " + errno_text()));
  if (!pc_ok) return 1;

  const std::uint64_t alias = abi::kSbiExtPvlockExperimentalDefault;
  if (!run_vcpu(vcpu.get())) {
    check(false, "KVM_RUN: " + errno_text());
    return 1;
  }
  check(is_sbi_exit(run, alias) && run->riscv_sbi.function_id == abi::kSbiPvlockKickCpu &&
            run->riscv_sbi.args[0] == static_cast<unsigned long>(kKickHart),
        "KICK_CPU at alias EID " + hex(alias) + " exits to userspace: " + describe_exit(run));
  if (!is_sbi_exit(run, alias)) return 1;
  run->riscv_sbi.ret[0] = static_cast<unsigned long>(kAliasRet[0]);
  run->riscv_sbi.ret[1] = static_cast<unsigned long>(kAliasRet[1]);

  if (!run_vcpu(vcpu.get())) {
    check(false, "KVM_RUN: " + errno_text());
    return 1;
  }
  const auto* stored = memory.as<char>();
  auto stored_i64 = [stored](std::int32_t offset) {
    std::int64_t v;
    std::memcpy(&v, stored + offset, sizeof v);
    return v;
  };
  // The guest stores the first call's a0/a1 before it makes the second.
  check(stored_i64(kAliasA0Offset) == kAliasRet[0] && stored_i64(kAliasA1Offset) == kAliasRet[1],
        "the guest resumed after the ecall with the probe's sbiret: a0 " +
            std::to_string(stored_i64(kAliasA0Offset)) + " a1 " + hex(stored_i64(kAliasA1Offset)));

  const std::uint64_t pvlk = abi::kSbiExtPvlock;
  if (expect_forwarded) {
    check(is_sbi_exit(run, pvlk) && run->riscv_sbi.function_id == abi::kSbiPvlockKickCpu,
          "KICK_CPU at EID " + hex(pvlk) + " exits to userspace: " + describe_exit(run));
    if (!is_sbi_exit(run, pvlk)) return 1;
    run->riscv_sbi.ret[0] = abi::kSbiSuccess;
    if (!run_vcpu(vcpu.get())) {
      check(false, "KVM_RUN: " + errno_text());
      return 1;
    }
    check(stored_i64(kPvlkA0Offset) == abi::kSbiSuccess,
          "KICK_CPU at EID " + hex(pvlk) + " returned the probe's a0 " + std::to_string(stored_i64(kPvlkA0Offset)));
  } else {
    check(is_sbi_exit(run, kDoneEid),
          "KICK_CPU at EID " + hex(pvlk) + " makes no exit (next exit: " + describe_exit(run) + ")");
    check(stored_i64(kPvlkA0Offset) == abi::kSbiErrNotSupported,
          "KICK_CPU at EID " + hex(pvlk) + " returns a0 " + std::to_string(stored_i64(kPvlkA0Offset)) +
              " (want SBI_ERR_NOT_SUPPORTED " + std::to_string(abi::kSbiErrNotSupported) + ")");
  }
  check(is_sbi_exit(run, kDoneEid), "the guest ends with its ecall at EID " + hex(kDoneEid));
  return g_failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  // One line at a time, so that a probe stuck in KVM_RUN has shown how far it got.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  bool expect_forwarded = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--expect-forwarded") {
      expect_forwarded = true;
    } else {
      std::fprintf(stderr, "kvm-probe: error: unknown argument '%s' (usage: kvm-probe [--expect-forwarded])\n",
                   argv[i]);
      return 2;
    }
  }
  const int rc = probe(expect_forwarded);
  std::printf("%s\n", rc == 0 ? "kvm-probe: all checks passed" : "kvm-probe: FAILED");
  return rc;
}
