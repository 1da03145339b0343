// Writes the BootInfo that lockvisor's RISC-V VMM would give the RV64 guest
// for a lock-workload run, so that tests/riscv/lockvisor_mode.py can boot the
// guest in lockvisor mode under QEMU and OpenSBI (QEMU's generic loader puts
// the file in guest RAM, /chosen/lockvisor,boot-info names it). Built from
// the ABI headers, so the record is exactly what the guest was built against.
//
//   write_boot_info OUT PROGRAM VCPUS LOCK ITERATIONS [ARGS]
//       a BootInfo for PROGRAM on VCPUS harts, with the torture workload's
//       defaults on LOCK, ITERATIONS acquisitions per hart, SBI PVLOCK off,
//       ARGS ("key=value ...", the lock tuning) as BootInfo::args
//   write_boot_info --layout
//       the offsets the test reads guest memory with, "name value" per line
// Exit 0, or 2 with a one-line message on bad arguments.
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>

#include "lockvisor/abi/boot_info.h"
#include "lockvisor/abi/sbi_pvlock.h"
#include "lockvisor/abi/ucall.h"
#include "lockvisor/abi/workload.h"
#include "lockvisor/abi/workload_limits.h"

namespace {
using namespace lockvisor::abi;

int usage(const char* why) {
  std::fprintf(stderr, "write_boot_info: %s (usage: write_boot_info OUT PROGRAM VCPUS LOCK ITERATIONS [ARGS] | --layout)\n", why);
  return 2;
}

int print_layout() {
  std::printf("ucall_bytes %zu\n", sizeof(Ucall));
  std::printf("ucall_type %zu\n", offsetof(Ucall, type));
  std::printf("ucall_args %zu\n", offsetof(Ucall, args));
  std::printf("ucall_text %zu\n", offsetof(Ucall, text));
  std::printf("ucall_text_bytes %u\n", kUcallTextBytes);
  std::printf("ucall_done %u\n", static_cast<unsigned>(UcallType::kDone));
  std::printf("ucall_assert_fail %u\n", static_cast<unsigned>(UcallType::kAssertFail));
  std::printf("stats_bytes %zu\n", sizeof(WorkloadStats));
  std::printf("stats_ops %zu\n", offsetof(WorkloadStats, ops));
  std::printf("stats_violations %zu\n", offsetof(WorkloadStats, violations));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--layout") == 0) return print_layout();
  if (argc != 6 && argc != 7) return usage("wrong number of arguments");
  const unsigned long vcpus = std::strtoul(argv[3], nullptr, 10);
  const unsigned long long iterations = std::strtoull(argv[5], nullptr, 10);
  if (vcpus == 0 || vcpus > kMaxVcpus) return usage("VCPUS out of range");
  if (std::strlen(argv[2]) >= kProgramNameBytes) return usage("PROGRAM too long");
  const char* args = argc == 7 ? argv[6] : "";
  if (std::strlen(args) >= kProgramArgsBytes) return usage("ARGS too long");

  auto info = std::make_unique<BootInfo>();  // zeroed
  info->magic = kBootInfoMagic;
  info->version = kBootInfoVersion;
  info->size = sizeof(BootInfo);
  info->vcpu_count = static_cast<u32>(vcpus);
  info->flags = kBootFlagWorkload;
  info->sbi_experimental_eid = kSbiExtPvlockExperimentalDefault;
  std::strcpy(info->program, argv[2]);
  std::strcpy(info->args, args);
  info->numa_nodes = 1;
  WorkloadParams& p = info->workload;
  p = default_workload_params(WorkloadKind::kTorture);
  if (!set_lock_name(p, argv[4])) return usage("LOCK too long");
  p.cpus = vcpus;
  p.iterations = iterations;
  stamp_header(p);
  if (const WorkloadLimit* l = out_of_range(p)) return usage(l->name);

  std::ofstream out(argv[1], std::ios::binary);
  out.write(reinterpret_cast<const char*>(info.get()), sizeof(BootInfo));
  out.close();
  return out ? 0 : usage("cannot write OUT");
}
