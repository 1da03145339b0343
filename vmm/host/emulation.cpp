#include "vmm/host/emulation.h"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>

namespace lockvisor::host {
namespace {

bool cpu_has_hypervisor_flag() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("flags", 0) == 0) return (line + ' ').find(" hypervisor ") != std::string::npos;
  return false;
}

std::string dmi_system_vendor() {
  std::ifstream in("/sys/class/dmi/id/sys_vendor");
  std::string vendor;
  std::getline(in, vendor);
  return vendor;
}

}  // namespace

std::optional<OuterHost> parse_outer_host(std::string_view text) {
  std::map<std::string, std::string, std::less<>> fields;
  while (!text.empty()) {
    const auto end = text.find(';');
    const auto field = text.substr(0, end);
    const auto eq = field.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == field.size()) return std::nullopt;
    if (!fields.emplace(std::string(field.substr(0, eq)), std::string(field.substr(eq + 1))).second)
      return std::nullopt;
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
  }
  OuterHost h;
  const std::pair<const char*, std::string*> keys[] = {{"vendor", &h.vendor}, {"family", &h.family},
                                                       {"model", &h.model},   {"stepping", &h.stepping},
                                                       {"kernel", &h.kernel}, {"cpus", &h.cpus},
                                                       {"kvm", &h.kvm}};
  if (fields.size() != std::size(keys)) return std::nullopt;
  for (const auto& [key, value] : keys) {
    const auto it = fields.find(key);
    if (it == fields.end()) return std::nullopt;
    *value = it->second;
  }
  return h;
}

Emulation emulation_from(const char* marker, bool hypervisor_flag, std::string_view dmi_vendor) {
  Emulation e;
  if (marker == nullptr) return e;
  auto outer = parse_outer_host(marker);
  if (!outer)
    e.ignored = fmt::format("{} is not vendor=..;family=..;model=..;stepping=..;kernel=..;cpus=..;kvm=..",
                            kOuterHostVariable);
  else if (!hypervisor_flag)
    e.ignored = fmt::format("{} is set, but this CPU is no virtual machine's (no hypervisor flag)", kOuterHostVariable);
  else if (dmi_vendor != "QEMU")
    e.ignored = fmt::format("{} is set, but this machine is not QEMU's (DMI system vendor '{}')", kOuterHostVariable,
                            dmi_vendor);
  if (!e.ignored.empty()) return e;
  e.emulated = true;
  e.outer = std::move(outer);
  return e;
}

const Emulation& emulation() {
  static const Emulation e = emulation_from(std::getenv(kOuterHostVariable), cpu_has_hypervisor_flag(),
                                            dmi_system_vendor());
  return e;
}

nlohmann::json emulation_json(const Emulation& e) {
  nlohmann::json j = {{"emulated", e.emulated}, {"outer", nullptr}};
  if (e.outer)
    j["outer"] = {{"cpu_vendor", e.outer->vendor}, {"cpu_family", e.outer->family}, {"cpu_model", e.outer->model},
                  {"cpu_stepping", e.outer->stepping}, {"kernel", e.outer->kernel}, {"cpus", e.outer->cpus},
                  {"kvm", e.outer->kvm}};
  if (!e.ignored.empty()) j["outer_ignored"] = e.ignored;
  return j;
}

void print_emulation_warning(std::FILE* out) {
  if (const auto line = emulation_warning(emulation()); !line.empty()) fmt::print(out, "{}\n", line);
}

std::string emulation_warning(const Emulation& e) { return emulation_warning(emulation_json(e)); }

std::string outer_host_words(const nlohmann::json& host) {
  const auto outer = host.is_object() && host.contains("outer") && host.at("outer").is_object() ? host.at("outer")
                                                                                                 : nlohmann::json::object();
  const auto field = [&outer](const char* key) { return outer.value(key, std::string("?")); };
  return fmt::format("{} family {} model {} stepping {}, Linux {}, {} CPUs, KVM {}", field("cpu_vendor"),
                     field("cpu_family"), field("cpu_model"), field("cpu_stepping"), field("kernel"), field("cpus"),
                     field("kvm"));
}

std::string emulation_warning(const nlohmann::json& host) {
  if (!host.is_object() || !host.value("emulated", false)) return {};
  return fmt::format("EMULATED (nested): made inside tools/nested-kvm, a QEMU TCG machine with an emulated AMD-V CPU, "
                     "on the outer host {}; every time is the emulator's: only ratios within this run mean anything",
                     outer_host_words(host));
}

}  // namespace lockvisor::host
