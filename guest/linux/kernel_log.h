// The kernel's own account of its spinlock choice, read from its log. On a
// KVM guest, kvm_spinlock_init() (arch/x86/kernel/kvm.c) prints one of
//   "kvm-guest: PV spinlocks enabled"
//   "kvm-guest: PV spinlocks disabled, no host support"
//   "kvm-guest: PV spinlocks disabled, single CPU"
//   "kvm-guest: PV spinlocks disabled with KVM_HINTS_REALTIME hints"
//   "kvm-guest: PV spinlocks disabled, forced by \"nopvspin\" parameter"
// and with PV spinlocks on, the qspinlock code allocates its hash table
// ("PV qspinlock hash table entries: ..."). The init passes such lines on
// raw; the VMM decides what they mean.
#pragma once
#include <string>
#include <vector>

namespace lockvisor::linux_init {

struct SpinlockLog {
  std::string source;  // "kmsg", "klogctl", or "none" when neither could be read
  int error = 0;       // errno of the last attempt when source is "none"
  std::vector<std::string> lines;  // message texts, at most kMaxSpinlockLines
};

// Reads the whole log buffer (/dev/kmsg, falling back to klogctl(2)).
SpinlockLog read_spinlock_log();

// Whether a log message is one the init reports (exposed for the tests).
bool is_spinlock_message(const std::string& text);

}  // namespace lockvisor::linux_init
