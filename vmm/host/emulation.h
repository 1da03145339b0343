// Whether this process runs inside tools/nested-kvm: Linux KVM in a QEMU TCG
// machine whose AMD-V CPU is emulated. There every time is the emulator's
// (a bare exit costs tens of microseconds more than on any real CPU), so a
// result made there must say so, name the real (outer) host beside the
// emulated one, and warn that only ratios within one run mean anything.
//
// The outer host is described by tools/nested-kvm/run.sh in the environment
// variable LOCKVISOR_OUTER_HOST (kOuterHostVariable), as
// "vendor=V;family=F;model=M;stepping=S;kernel=K;cpus=N;kvm=KIND". The
// variable alone is not believed (it may leak into a shell on a real host):
// this CPU must also say it is a guest (the CPUID hypervisor bit, the
// "hypervisor" flag of /proc/cpuinfo) and the machine must be QEMU's (its
// DMI system vendor, /sys/class/dmi/id/sys_vendor). Both hold in the nested
// machine, which boots through QEMU's firmware; neither CPU flags nor DMI
// alone tell the emulated machine from a cloud VM on real hardware.
#pragma once
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace lockvisor::host {

inline constexpr const char* kOuterHostVariable = "LOCKVISOR_OUTER_HOST";

struct OuterHost {
  std::string vendor, family, model, stepping, kernel, cpus, kvm;
};

// nullopt when `text` is not the run.sh format (a missing or unknown key,
// an empty value).
std::optional<OuterHost> parse_outer_host(std::string_view text);

struct Emulation {
  bool emulated = false;
  std::optional<OuterHost> outer;  // set when emulated
  // When the variable is set but not believed: why (else empty).
  std::string ignored;
};

// From the variable's value (nullptr: unset), the CPU's hypervisor flag and
// the DMI system vendor ("" when there is none).
Emulation emulation_from(const char* marker, bool hypervisor_flag, std::string_view dmi_vendor);
// This process's, read once.
const Emulation& emulation();

// {"emulated": bool, "outer": {cpu_vendor, cpu_family, cpu_model,
// cpu_stepping, kernel, cpus, kvm} | null}, plus "outer_ignored" with the
// reason when a marker was not believed: the keys every report's host
// section carries.
nlohmann::json emulation_json(const Emulation& e);
// The outer host of a report's host section, in words: "AuthenticAMD family
// 26 model 2 stepping 1, Linux 6.18.44, 2 CPUs, KVM none".
std::string outer_host_words(const nlohmann::json& host);
// One line for people: "EMULATED (nested): ..." with the outer host and the
// warning; empty when not emulated.
std::string emulation_warning(const Emulation& e);
// The same line from a report's host section (emulation_json's keys), for
// a report written later from its JSON; empty when not emulated.
std::string emulation_warning(const nlohmann::json& host);
// Prints this process's warning as a line of `out`, when emulated.
void print_emulation_warning(std::FILE* out);

}  // namespace lockvisor::host
