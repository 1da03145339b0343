#include "vmm/kvm/kvm_system.h"

#include <fcntl.h>
#include <sys/ioctl.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "vmm/kvm/uapi_layout.h"
#include "vmm/util/error.h"

namespace lockvisor::kvm {

const char* backend_name(Backend backend) {
  switch (backend) {
    case Backend::kPvm: return "PVM";
    case Backend::kVmx: return "VMX";
    case Backend::kSvm: return "SVM";
    case Backend::kNone: return "none";
    case Backend::kUnknown: break;
  }
  return "unknown";
}

namespace {

// The KVM this kernel is built for, from its modules and CPU flags alone.
Backend kernel_flavour() {
  if (std::filesystem::exists("/sys/module/kvm_pvm")) return Backend::kPvm;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    line += ' ';
    if (line.find(" vmx ") != std::string::npos) return Backend::kVmx;
    if (line.find(" svm ") != std::string::npos) return Backend::kSvm;
    break;
  }
  // kvm_amd / kvm_intel loaded without the flag visible (unusual): trust the module.
  if (std::filesystem::exists("/sys/module/kvm_amd")) return Backend::kSvm;
  if (std::filesystem::exists("/sys/module/kvm_intel")) return Backend::kVmx;
  return Backend::kUnknown;
}

}  // namespace

Backend detect_backend() {
  try {
    KvmSystem::open();
  } catch (const Error&) {
    return Backend::kNone;
  }
  return kernel_flavour();
}

bool kernel_is_pvm_guest() {
  return std::filesystem::exists("/sys/module/kvm_pvm") && !std::filesystem::exists(kDefaultKvmDevice);
}

std::string kvm_device_path() {
  const char* path = std::getenv(kKvmDeviceVariable);
  return path != nullptr && *path != '\0' ? path : kDefaultKvmDevice;
}

KvmSystem KvmSystem::open(const std::string& path) {
  int raw = -1;
  do raw = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  while (raw < 0 && errno == EINTR);
  UniqueFd fd(raw);
  if (!fd.valid()) {
    const int err = errno;
    // A kernel that is itself a PVM guest has kvm_pvm loaded and no device:
    // loading a module does not help there, the nested machine does.
    if (err == ENOENT)
      fail_host("no usable KVM at {}: {} ({}, or name the KVM device in {})", path, std::strerror(err),
                kernel_is_pvm_guest()
                    ? "this kernel is a PVM guest without a KVM of its own: run lockvisor in tools/nested-kvm/run.sh"
                    : "load kvm_intel, kvm_amd or kvm_pvm",
                kKvmDeviceVariable);
    if (err == EACCES || err == EPERM)
      fail_host("no usable KVM at {}: {} (run as root or join the group that owns it)", path, std::strerror(err));
    fail_host("no usable KVM at {}: {}", path, std::strerror(err));
  }
  const int version = ::ioctl(fd.get(), KVM_GET_API_VERSION, 0);
  if (version < 0)
    fail_host("no usable KVM at {}: KVM_GET_API_VERSION: {} (not a KVM device?)", path, std::strerror(errno));
  if (version != KVM_API_VERSION)
    fail_host("no usable KVM at {}: KVM API version {} is not the supported version {}", path, version,
              KVM_API_VERSION);
  return KvmSystem(std::move(fd), version);
}

int KvmSystem::check_extension(long capability) const {
  const int value = ::ioctl(fd_.get(), KVM_CHECK_EXTENSION, capability);
  return value < 0 ? 0 : value;
}

void KvmSystem::require_extension(long capability, const char* name) const {
  if (check_extension(capability) <= 0) fail_host("this KVM lacks the capability {}, which lockvisor needs", name);
}

VcpuLimit vcpu_limit(int max_vcpus_cap, int nr_vcpus_cap) {
  if (max_vcpus_cap > 0) return {static_cast<unsigned>(max_vcpus_cap), "KVM_CAP_MAX_VCPUS"};
  if (nr_vcpus_cap > 0) return {static_cast<unsigned>(nr_vcpus_cap), "KVM_CAP_NR_VCPUS"};
  return {4, "the KVM API's default without KVM_CAP_NR_VCPUS"};
}

VcpuLimit KvmSystem::vcpu_limit() const {
  return kvm::vcpu_limit(check_extension(KVM_CAP_MAX_VCPUS), check_extension(KVM_CAP_NR_VCPUS));
}

int KvmSystem::vcpu_mmap_size() const {
  const int size = ::ioctl(fd_.get(), KVM_GET_VCPU_MMAP_SIZE, 0);
  if (size < static_cast<int>(sizeof(kvm_run))) fail_host("KVM_GET_VCPU_MMAP_SIZE failed: {}", std::strerror(errno));
  return size;
}

std::vector<kvm_cpuid_entry2> KvmSystem::supported_cpuid() const {
  // kvm_cpuid2 ends in a flexible array: size the buffer in entries and let
  // KVM tell us (E2BIG) when it needs more.
  // Start at KVM_MAX_CPUID_ENTRIES (256): some kernels answer a short buffer
  // with EINVAL rather than E2BIG.
  for (std::size_t capacity = 256; capacity <= 4096; capacity *= 2) {
    std::vector<std::byte> buffer(sizeof(uapi::Cpuid2Header) + capacity * sizeof(kvm_cpuid_entry2));
    uapi::Cpuid2Header header{static_cast<std::uint32_t>(capacity), 0};
    std::memcpy(buffer.data(), &header, sizeof header);
    if (::ioctl(fd_.get(), uapi::kGetSupportedCpuid, buffer.data()) == 0) {
      std::memcpy(&header, buffer.data(), sizeof header);
      std::vector<kvm_cpuid_entry2> entries(header.nent);
      std::memcpy(entries.data(), buffer.data() + sizeof header, header.nent * sizeof(kvm_cpuid_entry2));
      return entries;
    }
    if (errno != E2BIG) fail_host("KVM_GET_SUPPORTED_CPUID ({} entries) failed: {}", capacity, std::strerror(errno));
  }
  fail_host("KVM_GET_SUPPORTED_CPUID: more than 4096 entries");
}

UniqueFd KvmSystem::create_vm() const {
  // Retry on EINTR: a signal during VM creation is not a reason to give up.
  int vm = -1;
  do vm = ::ioctl(fd_.get(), KVM_CREATE_VM, 0);
  while (vm < 0 && errno == EINTR);
  if (vm < 0) fail_host("KVM_CREATE_VM failed: {}", std::strerror(errno));
  return UniqueFd(vm);
}

}  // namespace lockvisor::kvm
