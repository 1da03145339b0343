// A test whose host lacks what it needs (SCHED_FIFO, a Debian tool, /dev/kvm)
// skips with the reason on a developer machine and fails in CI (CI=true):
// there tools/install-deps.sh has installed every tool and the tests run as
// root, so a skip would hide a missing feature.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace lockvisor::test {

inline bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

}  // namespace lockvisor::test

// Use in a test body: `if (!ready) LOCKVISOR_SKIP_OUTSIDE_CI("why");`.
#define LOCKVISOR_SKIP_OUTSIDE_CI(why)                                               \
  do {                                                                               \
    if (::lockvisor::test::in_ci()) FAIL() << "must run in CI (CI=true): " << (why); \
    GTEST_SKIP() << (why);                                                           \
  } while (0)
