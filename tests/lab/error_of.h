// The lab tests' way to read a refusal: the one-line message of the
// lockvisor::Error that `f` throws, or "" when it throws none.
#pragma once
#include <functional>
#include <string>

#include "vmm/util/error.h"

namespace lockvisor::lab {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace lockvisor::lab
