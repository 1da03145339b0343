#include "vmm/lab/lab_files.h"

#include <fmt/format.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "vmm/host/cpu_set.h"
#include "vmm/host/host_cpus.h"
#include "vmm/lab/matrix.h"
#include "vmm/lab/metrics.h"
#include "vmm/lab/point_runner.h"
#include "vmm/machine/run_result.h"
#include "vmm/util/error.h"

namespace lockvisor::lab {
namespace {

enum class Kind { kString, kBool, kWhole, kNumber, kObject, kObjectOrNull, kArray };

const char* kind_words(Kind k) {
  switch (k) {
    case Kind::kString: return "a string";
    case Kind::kBool: return "true or false";
    case Kind::kWhole: return "a whole number";
    case Kind::kNumber: return "a number";
    case Kind::kObject: return "an object";
    case Kind::kObjectOrNull: return "an object or null";
    case Kind::kArray: return "an array";
  }
  return "?";
}

bool is(const nlohmann::json& v, Kind k) {
  switch (k) {
    case Kind::kString: return v.is_string();
    case Kind::kBool: return v.is_boolean();
    case Kind::kWhole: return v.is_number_unsigned() && v.get<std::uint64_t>() <= std::numeric_limits<unsigned>::max();
    case Kind::kNumber: return v.is_number();
    case Kind::kObject: return v.is_object();
    case Kind::kObjectOrNull: return v.is_object() || v.is_null();
    case Kind::kArray: return v.is_array();
  }
  return false;
}

struct Field {
  const char* pointer;
  Kind kind;
  bool required = false;
};

// Every key of lab.json the lab reads, with its type: the plan (lab.cpp),
// the placement (placement.cpp) and the machine (lab_report.cpp,
// platform_part.cpp, host/emulation.cpp). A parent comes before its keys, so
// a parent of the wrong type is what a message names.
const Field kManifestFields[] = {
    {"/origin", Kind::kString, true},
    {"/scenario_text", Kind::kString, true},
    {"/repeats", Kind::kWhole, true},
    {"/native", Kind::kBool, true},
    {"/shard", Kind::kString, true},
    {"/overrides", Kind::kArray},
    {"/version", Kind::kString},
    {"/command", Kind::kString},
    {"/machine", Kind::kObject, true},
    {"/machine/cpu_vendor", Kind::kString},
    {"/machine/cpu_family", Kind::kString},
    {"/machine/cpu_model", Kind::kString},
    {"/machine/cpu_stepping", Kind::kString},
    {"/machine/cpu_model_name", Kind::kString},
    {"/machine/host_cpus", Kind::kWhole},
    {"/machine/allowed_cpus", Kind::kString},
    {"/machine/kernel", Kind::kString},
    {"/machine/kvm", Kind::kString},
    {"/machine/loadavg_at_start", Kind::kString},
    {"/machine/emulated", Kind::kBool},
    {"/machine/outer", Kind::kObjectOrNull},
    {"/machine/outer/cpu_vendor", Kind::kString},
    {"/machine/outer/cpu_family", Kind::kString},
    {"/machine/outer/cpu_model", Kind::kString},
    {"/machine/outer/cpu_stepping", Kind::kString},
    {"/machine/outer/kernel", Kind::kString},
    {"/machine/outer/cpus", Kind::kString},
    {"/machine/outer/kvm", Kind::kString},
    {"/machine/host_slice", Kind::kObject},
    {"/machine/host_slice/definition", Kind::kString},
    {"/machine/host_slice/source", Kind::kString},
    {"/machine/platform", Kind::kObject},
    {"/machine/platform/exits", Kind::kObject},
    {"/machine/platform/exits/not_measured", Kind::kString},
    {"/machine/platform/pause_loop_exiting", Kind::kObject},
    {"/machine/platform/pause_loop_exiting/module", Kind::kString},
    {"/machine/platform/pause_loop_exiting/values", Kind::kObject},
    {"/placement", Kind::kObject},
    {"/placement/host_cpus", Kind::kString},
    {"/placement/cpu_count", Kind::kWhole},
    {"/placement/source", Kind::kString},
    {"/placement/terms", Kind::kArray},
    {"/placement/left_out", Kind::kArray},
    {"/placement/left_out_points", Kind::kArray},
    {"/placement/vcpu_limit", Kind::kWhole},
    {"/placement/vcpu_limit_source", Kind::kString},
    {"/placement/vm_only", Kind::kObject},
};

// The entries of lab.json's lists of objects, each key of its type.
struct ListFields {
  const char* pointer;
  std::vector<Field> fields;
};
const ListFields kManifestLists[] = {
    {"/placement/terms", {{"/setting", Kind::kString}, {"/word", Kind::kString}, {"/resolved", Kind::kString}}},
    {"/placement/left_out", {{"/axis", Kind::kString}, {"/label", Kind::kString}, {"/min_cpus", Kind::kWhole}}},
    {"/placement/left_out_points", {{"/key", Kind::kString}, {"/vcpus", Kind::kWhole}, {"/why", Kind::kString}}},
};

// "/machine/host_slice" as a reader of lab.json names it: machine.host_slice.
std::string key_words(const std::string& pointer) {
  std::string key = pointer.substr(1);
  for (auto& c : key)
    if (c == '/') c = '.';
  return key;
}

void check_field(const nlohmann::json& j, const Field& f, const std::string& prefix, const std::string& path) {
  const nlohmann::json::json_pointer ptr(f.pointer);
  const auto key = prefix + key_words(f.pointer);
  if (!j.contains(ptr)) {
    if (f.required) fail("{}: no '{}': not a lab's manifest (or a damaged one)", path, key);
    return;
  }
  if (!is(j.at(ptr), f.kind)) fail("{}: {}: expected {}, not {}", path, key, kind_words(f.kind), j.at(ptr).dump());
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot read", path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void check_manifest(const nlohmann::json& m, const std::string& path) {
  if (!m.is_object()) fail("{}: expected a JSON object (a lab's manifest), not {}", path, m.type_name());
  for (const auto& f : kManifestFields) check_field(m, f, "", path);
  for (const auto& list : kManifestLists) {
    const nlohmann::json::json_pointer ptr(list.pointer);
    if (!m.contains(ptr)) continue;
    const auto& items = m.at(ptr);
    for (std::size_t i = 0; i < items.size(); ++i) {
      const auto prefix = fmt::format("{}[{}].", key_words(list.pointer), i);
      if (!items[i].is_object()) fail("{}: {}: expected an object, not {}", path, prefix.substr(0, prefix.size() - 1),
                                      items[i].dump());
      for (const auto& f : list.fields) check_field(items[i], f, prefix, path);
    }
  }
  const auto repeats = m.at("repeats").get<unsigned>();
  if (repeats < 1 || repeats > kMaxRepeats) fail("{}: repeats: {}: expected 1..{}", path, repeats, kMaxRepeats);
  try {
    parse_shard(m.at("shard").get<std::string>());
  } catch (const Error&) {
    fail("{}: shard: '{}': expected I/N with 1 <= I <= N", path, m.at("shard").get<std::string>());
  }
  if (m.contains("overrides"))
    for (const auto& o : m.at("overrides"))
      if (!o.is_array() || o.size() != 2 || !o[0].is_string() || !o[1].is_string())
        fail("{}: overrides: {}: expected [\"NAME\", \"VALUE\"]", path, o.dump());
  if (const nlohmann::json::json_pointer cpus("/placement/host_cpus"); m.contains(cpus)) {
    const auto list = m.at(cpus).get<std::string>();
    try {
      if (!host::is_cpu_list(list)) fail("not a CPU list");
      host::parse_cpu_list(list);
    } catch (const Error&) {
      fail("{}: placement.host_cpus: '{}': expected a CPU list (0-15)", path, list);
    }
  }
  if (const nlohmann::json::json_pointer vm_only("/placement/vm_only"); m.contains(vm_only))
    for (const auto& [key, why] : m.at(vm_only).items())
      if (!why.is_string()) fail("{}: placement.vm_only.{}: expected a string, not {}", path, key, why.dump());
  if (const nlohmann::json::json_pointer exits("/machine/platform/exits"); m.contains(exits))
    for (const auto& [name, figure] : m.at(exits).items()) {
      if (name == "not_measured") continue;
      const auto prefix = fmt::format("machine.platform.exits.{}", name);
      if (!figure.is_object()) fail("{}: {}: expected an object, not {}", path, prefix, figure.dump());
      for (const char* key : {"/median", "/p99"}) check_field(figure, {key, Kind::kNumber}, prefix + ".", path);
    }
}

// One run report (or one VM's, in a multi-VM point) of a completed run:
// every metric the summary reads from it.
void check_report(const nlohmann::json& report, const std::string& id, const std::string& where) {
  if (!report.is_object()) fail("{}: report: a completed run's report must be an object, not {}", where, report.dump());
  try {
    for (const auto& m : metrics()) read_metric(m, report, id);
  } catch (const Error& e) {
    fail("{}: {}", where, e.what());
  }
}

void check_outcome(const nlohmann::json& outcome, const char* key, const std::string& where) {
  if (!outcome.is_string() || !is_point_outcome(outcome.get<std::string>()))
    fail("{}: {}: {}: not an outcome of a point ({})", where, key, outcome.dump(), point_outcomes_text());
}

}  // namespace

nlohmann::json read_manifest(const std::string& dir) {
  const auto path = (std::filesystem::path(dir) / kManifest).string();
  if (!std::filesystem::exists(path)) fail("{}: no {} here: not a lab directory", dir, kManifest);
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(read_text(path));
  } catch (const nlohmann::json::exception&) {
    fail("{}: not JSON", path);
  }
  check_manifest(m, path);
  return m;
}

void check_results(const LoadedResults& loaded, const std::string& path, const Scenario& s) {
  const std::uint64_t total = matrix_size(s);
  const std::string completed = machine::outcome_name(machine::Outcome::kCompleted);
  std::map<std::string, std::string> keys;  // id -> key, every point of the lab
  for (const auto& p : expand(s)) keys.emplace(p.id, p.key);
  for (std::size_t i = 0; i < loaded.records.size(); ++i) {
    const auto& r = loaded.records[i];
    const auto where = fmt::format("{}:{}", path, i < loaded.lines.size() ? loaded.lines[i] : i + 1);
    const auto id = r.at("id").get<std::string>();  // load_results checked it
    const auto point = keys.find(id);
    if (point == keys.end()) fail("{}: point '{}' is not part of this lab", where, id);
    if (r.contains("key") && r.at("key") != point->second)
      fail("{}: key: {}: point '{}' has the key '{}'", where, r.at("key").dump(), id, point->second);
    const auto whole_below = [&](const char* key, std::uint64_t end, const std::string& what) {
      if (!r.contains(key)) fail("{}: no '{}'", where, key);
      const auto& v = r.at(key);
      if (!v.is_number_unsigned() || v.get<std::uint64_t>() >= end)
        fail("{}: {}: {}: expected a whole number 0..{} ({})", where, key, v.dump(), end - 1, what);
    };
    whole_below("repeat", s.repeats, fmt::format("the lab runs {} repeat{} per point", s.repeats, s.repeats == 1 ? "" : "s"));
    whole_below("index", total, fmt::format("the matrix has {} points", total));
    if (!r.contains("outcome")) fail("{}: no 'outcome'", where);
    check_outcome(r.at("outcome"), "outcome", where);
    for (const char* key : {"exit_code", "wall_s", "finished_at"})
      if (r.contains(key) && !r.at(key).is_number()) fail("{}: {}: expected a number, not {}", where, key, r.at(key).dump());
    if (r.contains("wall_s") && r.at("wall_s").get<double>() < 0)
      fail("{}: wall_s: {}: a time is not negative", where, r.at("wall_s").dump());
    if (r.contains("cpus") && !r.at("cpus").is_string())
      fail("{}: cpus: expected a CPU list (a string), not {}", where, r.at("cpus").dump());
    if (!r.contains("report")) fail("{}: no 'report' (a result line holds its run's report, or null)", where);
    const auto& report = r.at("report");
    if (!report.is_object() && !report.is_null())
      fail("{}: report: expected the run's report (an object) or null, not {}", where, report.dump());
    const bool completed_run = r.at("outcome").get<std::string>() == completed;
    if (s.vms.empty()) {
      if (completed_run) check_report(report, id, where);
      continue;
    }
    // A multi-VM point: each VM's entry (multivm/multi_vm_run.h, to_json).
    if (!report.is_object() || !report.contains("vms")) continue;
    if (!report.at("vms").is_array()) fail("{}: report.vms: expected an array, not {}", where, report.at("vms").dump());
    for (const auto& e : report.at("vms")) {
      if (!e.is_object() || !e.contains("label") || !e.at("label").is_string())
        fail("{}: report.vms: {}: expected an object with a string \"label\"", where, e.dump());
      const auto vm = e.at("label").get<std::string>();
      if (!e.contains("outcome")) fail("{}: report.vms (VM {}): no 'outcome'", where, vm);
      check_outcome(e.at("outcome"), "report.vms outcome", where);
      if (!e.contains("result")) fail("{}: report.vms (VM {}): no 'result'", where, vm);
      if (e.at("outcome").get<std::string>() == completed) check_report(e.at("result"), id + " vm=" + vm, where);
    }
  }
}

}  // namespace lockvisor::lab
