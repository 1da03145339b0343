// The CPL3 guard on real images: the guest image itself must be clean, and
// the planted images (planted.S) must produce exactly the planted violations.
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cpl3_guard.h"

namespace lockvisor::guest_image {
namespace {

constexpr const char* kObjdump = LOCKVISOR_OBJDUMP;

std::size_t index(Region r) { return static_cast<std::size_t>(r); }

std::string describe(const Report& report) {
  std::string out;
  for (const Violation& v : report.violations) out += format_violation(v) + "\n";
  return out + format_summary(report);
}

// "region rule symbol+offset", in address order.
std::vector<std::string> brief(const Report& report) {
  std::vector<std::string> out;
  for (const Violation& v : report.violations)
    out.push_back(std::string(region_name(v.region)) + " " + std::string(rule_name(v.rule)) + " " + v.symbol +
                  "+" + std::to_string(v.offset));
  return out;
}

TEST(Cpl3GuardGuestImage, CodeRunningAtCpl3BreaksNoRule) {
  const Report report = check_elf(LOCKVISOR_GUEST_ELF, kObjdump);
  std::cout << format_summary(report) << "\n";
  // Sanity: the whole image was seen, CPL0 part included.
  EXPECT_GT(report.summary.instructions[index(Region::kCpl0)], 0u);
  EXPECT_GT(report.summary.instructions[index(Region::kCpl3)], 1000u);
  EXPECT_TRUE(report.clean()) << report.violations.size() << " violations:\n" << describe(report);
}

// planted.S assumes these of the ABI's table.
bool abi_grants(std::uint16_t port, std::uint8_t width, bool is_in) {
  return std::any_of(
      std::begin(abi::kCpl3PortAccesses), std::end(abi::kCpl3PortAccesses),
      [&](const abi::PortAccess& p) { return p.port == port && p.width == width && p.is_in == is_in; });
}
bool abi_has_port(std::uint16_t port) {
  return std::any_of(std::begin(abi::kCpl3PortAccesses), std::end(abi::kCpl3PortAccesses),
                     [&](const abi::PortAccess& p) { return p.port == port; });
}

TEST(Cpl3GuardPlantedImage, AssumptionsAboutTheAbiHold) {
  EXPECT_TRUE(abi_grants(0xe4, 1, false));
  EXPECT_TRUE(abi_grants(0xe5, 1, false));
  EXPECT_FALSE(abi_grants(0xe4, 4, false));
  EXPECT_FALSE(abi_has_port(0x80));
}

const std::vector<std::string> kPlanted = {
    "doorbell port-not-in-abi plant_doorbell_port_not_in_abi+0",
    "doorbell port-width plant_doorbell_too_wide+0",
    "cpl3 int-n plant_int_0x80+0",
    "cpl3 cpuid plant_cpuid+0",
    "cpl3 hlt plant_hlt+0",
    "cpl3 cli-sti plant_cli+0",
    "cpl3 cli-sti plant_sti+0",
    "cpl3 vmcall plant_vmcall+0",
    "cpl3 vmcall plant_vmmcall+0",
    "cpl3 rdtscp plant_rdtscp+0",
    "cpl3 port-io-outside-doorbell plant_out_imm+0",
    "cpl3 port-io-outside-doorbell plant_in_dx+0",
    "cpl3 ud plant_ud2+0",
};

TEST(Cpl3GuardPlantedImage, ReportsExactlyThePlantedViolations) {
  const Report report = check_elf(LOCKVISOR_PLANTED_ELF, kObjdump);
  EXPECT_EQ(brief(report), kPlanted) << describe(report);
  for (const Violation& v : report.violations)
    EXPECT_TRUE(v.region == Region::kCpl3 || v.region == Region::kDoorbell) << format_violation(v);
  // The exempt regions were scanned, and the fault region is accounted for.
  EXPECT_GE(report.summary.instructions[index(Region::kCpl0)], 3u);
  EXPECT_GE(report.summary.instructions[index(Region::kFault)], 2u);
  EXPECT_LE(report.summary.bytes[index(Region::kFault)], Options{}.max_fault_region_bytes);
  EXPECT_EQ(report.summary.fault_symbols, std::vector<std::string>{"fault_case"});
}

TEST(Cpl3GuardPlantedImage, OversizeFaultRegionIsRejected) {
  const Report report = check_elf(LOCKVISOR_PLANTED_OVERSIZE_ELF, kObjdump);
  std::vector<std::string> expected = kPlanted;
  expected.push_back("fault fault-region-too-large __fault_text_start+0");
  EXPECT_EQ(brief(report), expected) << describe(report);
  EXPECT_GT(report.summary.bytes[index(Region::kFault)], Options{}.max_fault_region_bytes);
  // A larger bound accepts it: the size is the only reason.
  const Report roomy =
      check_elf(LOCKVISOR_PLANTED_OVERSIZE_ELF, kObjdump, Options{.max_fault_region_bytes = 4096});
  EXPECT_EQ(brief(roomy), kPlanted) << describe(roomy);
}

TEST(Cpl3GuardPlantedImage, CleanVariantPasses) {
  const Report report = check_elf(LOCKVISOR_PLANTED_CLEAN_ELF, kObjdump);
  EXPECT_TRUE(report.clean()) << describe(report);
  EXPECT_GT(report.summary.instructions[index(Region::kDoorbell)], 0u);
}

TEST(Cpl3GuardBadInput, MissingFileOrMissingRegionSymbolsThrow) {
  EXPECT_THROW(check_elf("/nonexistent/guest.elf", kObjdump), GuardError);
  // Any ELF not linked with the guest's linker script: this test program.
  try {
    check_elf(std::filesystem::canonical("/proc/self/exe"), kObjdump);
    ADD_FAILURE() << "no GuardError";
  } catch (const GuardError& e) {
    EXPECT_NE(std::string(e.what()).find("missing symbol __cpl0_text_start"), std::string::npos) << e.what();
  }
}

int run_guard(const std::string& args) {
  const std::string command = std::string(LOCKVISOR_CPL3_GUARD) + " " + args + " >/dev/null 2>&1";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(Cpl3GuardTool, ExitStatus) {
  EXPECT_EQ(run_guard(LOCKVISOR_PLANTED_CLEAN_ELF), 0);
  EXPECT_EQ(run_guard(LOCKVISOR_PLANTED_ELF), 1);
  EXPECT_EQ(run_guard("--max-fault-bytes 0 " LOCKVISOR_PLANTED_CLEAN_ELF), 1);
  EXPECT_EQ(run_guard("/nonexistent/guest.elf"), 2);
  EXPECT_EQ(run_guard(LOCKVISOR_CPL3_GUARD), 2);  // an ELF without the region symbols
  EXPECT_EQ(run_guard(""), 2);                     // usage
}

}  // namespace
}  // namespace lockvisor::guest_image
