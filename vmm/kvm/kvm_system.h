// /dev/kvm (or $LOCKVISOR_KVM_DEVICE): the host's KVM, what it offers, and
// which kind of KVM it is.
#pragma once
#include <linux/kvm.h>

#include <string>
#include <vector>

#include "vmm/util/unique_fd.h"

namespace lockvisor::kvm {

// How the host implements KVM. It decides what runs fast (see
// docs/design.md): on PVM, guest CPL0 code is emulated instruction by
// instruction and `vmcall` never completes; on VMX/SVM both run natively.
// kNone: there is no usable KVM device (kvm_device_path() does not open as
// one), whatever modules the kernel has.
enum class Backend { kPvm, kVmx, kSvm, kUnknown, kNone };
const char* backend_name(Backend backend);
// The host's KVM kind, as every report names it: kNone unless the KVM device
// opens (KvmSystem::open); then from the kernel's modules and CPU flags
// (/sys/module/kvm_pvm: PVM; the vmx/svm flag: hardware).
Backend detect_backend();
// Whether this kernel is itself a PVM guest: kvm_pvm is loaded but made no
// /dev/kvm ("this kernel is itself a kvm-pvm guest; not binding"). No module
// gives it a KVM; tools/nested-kvm does.
bool kernel_is_pvm_guest();

// The KVM device to open: $LOCKVISOR_KVM_DEVICE when set and not empty,
// otherwise /dev/kvm.
inline constexpr const char* kKvmDeviceVariable = "LOCKVISOR_KVM_DEVICE";
inline constexpr const char* kDefaultKvmDevice = "/dev/kvm";
std::string kvm_device_path();

// The most vCPUs one VM may have on this KVM, and which answer said so.
struct VcpuLimit {
  unsigned vcpus = 0;
  const char* source = "";  // the capability that gave it, or the API's documented default
};
// From the KVM_CHECK_EXTENSION answers (0: absent): KVM_CAP_MAX_VCPUS is the
// hard limit; a KVM without it documents KVM_CAP_NR_VCPUS as the limit, and
// one without either allows 4 (Documentation/virt/kvm/api.rst).
VcpuLimit vcpu_limit(int max_vcpus_cap, int nr_vcpus_cap);

class KvmSystem {
 public:
  // Opens the KVM device (kvm_device_path()) and checks the API version;
  // throws a host lockvisor::Error, one line naming the path and the reason
  // (absent, permission denied, not a KVM device, API mismatch).
  static KvmSystem open() { return open(kvm_device_path()); }
  static KvmSystem open(const std::string& path);

  int fd() const { return fd_.get(); }
  int api_version() const { return api_version_; }
  // KVM_CHECK_EXTENSION: 0 when absent, otherwise a capability-specific value.
  int check_extension(long capability) const;
  // Throws lockvisor::Error naming the capability when it is absent.
  void require_extension(long capability, const char* name) const;
  // vcpu_limit() of this KVM's answers.
  VcpuLimit vcpu_limit() const;
  int vcpu_mmap_size() const;
  std::vector<kvm_cpuid_entry2> supported_cpuid() const;
  UniqueFd create_vm() const;

 private:
  explicit KvmSystem(UniqueFd fd, int api_version) : fd_(std::move(fd)), api_version_(api_version) {}
  UniqueFd fd_;
  int api_version_ = 0;
};

}  // namespace lockvisor::kvm
