// /dev/kvm: the host's KVM, what it offers, and which kind of KVM it is.
#pragma once
#include <linux/kvm.h>

#include <string>
#include <vector>

#include "vmm/util/unique_fd.h"

namespace lockvisor::kvm {

// How the host implements KVM. It decides what runs fast (see
// docs/design.md): on PVM, guest CPL0 code is emulated instruction by
// instruction and `vmcall` never completes; on VMX/SVM both run natively.
enum class Backend { kPvm, kVmx, kSvm, kUnknown };
const char* backend_name(Backend backend);
Backend detect_backend();

class KvmSystem {
 public:
  // Opens /dev/kvm and checks the API version; throws lockvisor::Error with
  // the reason (absent, permission denied, API mismatch).
  static KvmSystem open(const std::string& path = "/dev/kvm");

  int fd() const { return fd_.get(); }
  int api_version() const { return api_version_; }
  // KVM_CHECK_EXTENSION: 0 when absent, otherwise a capability-specific value.
  int check_extension(long capability) const;
  // Throws lockvisor::Error naming the capability when it is absent.
  void require_extension(long capability, const char* name) const;
  int vcpu_mmap_size() const;
  std::vector<kvm_cpuid_entry2> supported_cpuid() const;
  UniqueFd create_vm() const;

 private:
  explicit KvmSystem(UniqueFd fd, int api_version) : fd_(std::move(fd)), api_version_(api_version) {}
  UniqueFd fd_;
  int api_version_ = 0;
};

}  // namespace lockvisor::kvm
