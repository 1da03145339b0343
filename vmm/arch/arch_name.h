// The names of the architectures lockvisor runs on, as RunResult, the run
// report and the conformance output print them ("arch"), and the one this
// build is for. Every other place reads the name from here.
#pragma once
#include <string_view>

namespace lockvisor::arch {

inline constexpr std::string_view kX86_64 = "x86_64";
inline constexpr std::string_view kRiscv64 = "riscv64";

#if defined(__x86_64__)
inline constexpr std::string_view kThisArch = kX86_64;
#elif defined(__riscv) && __riscv_xlen == 64
inline constexpr std::string_view kThisArch = kRiscv64;
#else
#error "lockvisor builds for x86-64 and riscv64 only: name the architecture in vmm/arch/arch_name.h"
#endif

}  // namespace lockvisor::arch
