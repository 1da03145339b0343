// `lockvisor conformance` on RISC-V KVM: the SBI PVLOCK cases, each a run of
// one of the RV64 guest's programs checked against what the ABI promises
// (sbi_pvlock.h, sbi_lockvisor.h). riscv64 only.
#pragma once
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lockvisor::arch::riscv64 {

struct RvCase {
  std::string name;
  bool passed = false;
  std::string reason;   // why it failed; empty when it passed
  std::string outcome;  // the run's outcome name
  double seconds = 0;
};

// Runs every case with `image` (the embedded RV64 guest unless --image).
std::vector<RvCase> run_rv_conformance(std::span<const std::byte> image);

// {arch, passed, failed, not_applicable, cases: [...]}, as x86's
// conformance --json (vmm/conformance/suite.h) with the architecture named.
nlohmann::json rv_conformance_json(const std::vector<RvCase>& cases);

}  // namespace lockvisor::arch::riscv64
