// How a test that needs /dev/kvm behaves without it: skip with the reason on
// a developer machine, fail in CI (CI=true), where a skipped KVM test would
// hide a missing feature.
#pragma once
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "tests/support/ci_required.h"
#include "vmm/kvm/kvm_system.h"
#include "vmm/util/error.h"

namespace lockvisor::test {

// Opens /dev/kvm once per process; nullptr (with the reason) when it cannot.
inline const kvm::KvmSystem* shared_kvm(std::string* why) {
  static std::string reason;
  static std::optional<kvm::KvmSystem> system = []() -> std::optional<kvm::KvmSystem> {
    try {
      return kvm::KvmSystem::open();
    } catch (const Error& e) {
      reason = e.what();
      return std::nullopt;
    }
  }();
  if (why) *why = reason;
  return system ? &*system : nullptr;
}

}  // namespace lockvisor::test

// Use at the top of a test body.
#define LOCKVISOR_REQUIRE_KVM(kvm_ptr)                                                                  \
  std::string lockvisor_kvm_reason_;                                                                     \
  const ::lockvisor::kvm::KvmSystem* kvm_ptr = ::lockvisor::test::shared_kvm(&lockvisor_kvm_reason_);    \
  if (kvm_ptr == nullptr) {                                                                              \
    if (::lockvisor::test::in_ci()) FAIL() << "KVM tests must run in CI: " << lockvisor_kvm_reason_;     \
    GTEST_SKIP() << "no usable KVM: " << lockvisor_kvm_reason_                                           \
                 << " (tools/test.sh runs these inside tools/nested-kvm)";                              \
  }
