// Reading a scenario from TOML into vmm/lab/scenario.h's types. One file (over
// 500 lines) because it is one job with one error style: every table and key
// a scenario may hold is checked here, so each refusal names its key and
// value the same way, and nothing past this file sees an unchecked setting.
#include "vmm/lab/scenario.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include <map>
#include <set>
#include <sstream>

#include "vmm/experiment/run_settings.h"
#include "vmm/host/host_cpus.h"
#include "vmm/lab/metrics.h"
#include "vmm/lab/placement.h"
#include "vmm/lab/point_runner.h"
#include "vmm/util/error.h"
#include "vmm/util/unique_fd.h"

namespace lockvisor::lab {
namespace {

// What a scenario's name and a VM's label may hold: they name files,
// points and rows.
constexpr const char* kNameCharacters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-";
constexpr std::size_t kMaxNameLength = 64;

std::string where_of(const toml::node& node, const std::string& origin) {
  const auto& src = node.source();
  return src.begin.line ? fmt::format("{}:{}", origin, src.begin.line) : origin;
}

// A TOML scalar as the text a `lockvisor run` option takes.
std::string scalar_text(const toml::node& node, const std::string& what, const std::string& origin) {
  if (auto s = node.value_exact<std::string>()) return *s;
  if (auto i = node.value_exact<std::int64_t>()) {
    if (*i < 0) fail("{}: {} = {}: must not be negative", where_of(node, origin), what, *i);
    return std::to_string(*i);
  }
  if (auto d = node.value_exact<double>()) return fmt::format("{}", *d);
  if (auto b = node.value_exact<bool>()) return *b ? "true" : "false";
  fail("{}: {}: expected a string, number or boolean", where_of(node, origin), what);
}

// A TOML value as the scenario spells it, for messages: "0.1" with its
// quotes, true, 4.
std::string shown(const toml::node& node, const std::string& text) {
  return node.is_string() ? fmt::format("{:?}", text) : text;
}

// A setting's value as the text a `lockvisor run` option takes, of the
// setting's type: a number where `run` takes one (or a string that is a
// host-relative word, vcpus = "2x", or holds a sweep's "{n}"), true or false
// for a switch, a placement word of a known form.
std::string setting_text(const Setting& s, const toml::node& node, const std::string& origin) {
  const auto text = scalar_text(node, s.name, origin);
  const auto* row = experiment::find_run_setting(s.name);
  const bool number = row != nullptr && (row->type == experiment::SettingType::kUnsigned ||
                                         row->type == experiment::SettingType::kSeconds);
  const bool word = node.is_string() && (takes_placement_words(s.name) || text.find("{n}") != std::string::npos);
  if (number && !node.is_number() && !word)
    fail("{}: {} = {}: expected a number{}", where_of(node, origin), s.name, shown(node, text),
         takes_placement_words(s.name) ? fmt::format(" or a word ({})", host::kVcpuForms)
                                       : node.is_string() ? ", not a string" : "");
  if (number && row->type == experiment::SettingType::kUnsigned && node.is_floating_point())
    fail("{}: {} = {}: expected a whole number", where_of(node, origin), s.name, text);
  if (s.flag && text != "true" && text != "false")
    fail("{}: {} = {}: expected true or false", where_of(node, origin), s.name, text);
  try {
    check_placement_word(s.name, text);
  } catch (const Error& e) {
    fail("{}: {}: {}", where_of(node, origin), s.name, e.what());
  }
  return text;
}

const Setting& known_setting(const std::string& name, const toml::node& node, const std::string& origin) {
  const Setting* s = find_setting(name);
  if (s == nullptr) {
    std::string names;
    for (const auto& k : settings()) names += (names.empty() ? "" : ", ") + std::string(k.name);
    fail("{}: unknown setting '{}' (settings: {})", where_of(node, origin), name, names);
  }
  return *s;
}

std::string required_string(const toml::table& t, const char* key, const std::string& what, const std::string& origin) {
  const auto* node = t.get(key);
  if (node == nullptr) fail("{}: {} needs '{}'", where_of(t, origin), what, key);
  auto s = node->value_exact<std::string>();
  if (!s) fail("{}: {}.{}: expected a string", where_of(*node, origin), what, key);
  return *s;
}

std::string optional_string(const toml::table& t, const char* key, const std::string& what, const std::string& origin,
                            std::string fallback = {}) {
  if (t.get(key) == nullptr) return fallback;
  return required_string(t, key, what, origin);
}

bool is_vm_label(const std::vector<VmSpec>& vms, const std::string& name) {
  for (const auto& vm : vms)
    if (vm.label == name) return true;
  return false;
}

std::string vm_setting_name(const std::string& label, const std::string& name) {
  return std::string(kVmSettingPrefix) + label + ":" + name;
}

// Settings of one VM: a [[vm]] table or an axis value's `LABEL = { ... }`.
void parse_vm_settings(const toml::table& t, const std::string& label, SettingValues& out, const std::string& origin) {
  for (const auto& [key, node] : t) {
    const std::string name(key.str());
    if (name == "label") continue;
    const Setting& setting = known_setting(name, node, origin);
    if (name == "native") fail("{}: VM '{}': native runs no VM", where_of(node, origin), label);
    assign(out, vm_setting_name(label, setting.name), setting_text(setting, node, origin));
  }
}

VmSpec parse_vm(const toml::table& t, const std::string& origin) {
  VmSpec vm;
  vm.label = required_string(t, "label", "[[vm]]", origin);
  if (vm.label.empty() || vm.label.size() > 32 || vm.label.find_first_not_of(kNameCharacters) != std::string::npos)
    fail("{}: [[vm]] label {:?}: 1-32 characters of A-Z a-z 0-9 _ . -", where_of(t, origin), vm.label);
  parse_vm_settings(t, vm.label, vm.settings, origin);
  return vm;
}

Axis parse_axis(const toml::table& t, const std::vector<VmSpec>& vms, const std::string& origin) {
  Axis axis;
  axis.name = required_string(t, "name", "[[axis]]", origin);
  const auto* values = t.get_as<toml::array>("values");
  if (values == nullptr || values->empty()) fail("{}: axis '{}' needs a non-empty 'values' array", where_of(t, origin), axis.name);
  const Setting* plain = find_setting(axis.name);
  std::set<std::string> labels;
  for (const auto& v : *values) {
    AxisValue value;
    if (const auto* table = v.as_table()) {
      value.label = required_string(*table, "label", fmt::format("axis '{}' value", axis.name), origin);
      for (const auto& [key, node] : *table) {
        const std::string name(key.str());
        if (name == "label") continue;
        if (name == "sweep") {
          value.sweep = scalar_text(node, name, origin);
          if (value.sweep != "cpus")
            fail("{}: axis '{}' sweep '{}': the only sweep is \"cpus\" (1, 2, 4, ... below the usable CPUs)",
                 where_of(node, origin), axis.name, value.sweep);
          continue;
        }
        if (name == "min_cpus") {
          const auto n = node.value_exact<std::int64_t>();
          if (!n || *n < 1 || *n > kMaxMinCpus)
            fail("{}: axis '{}' min_cpus: an integer 1..{} (the host CPUs the value needs)", where_of(node, origin),
                 axis.name, kMaxMinCpus);
          value.min_cpus = static_cast<unsigned>(*n);
          continue;
        }
        if (is_vm_label(vms, name)) {
          const auto* settings = node.as_table();
          if (settings == nullptr) fail("{}: {}: expected a table of that VM's settings", where_of(node, origin), name);
          parse_vm_settings(*settings, name, value.settings, origin);
          continue;
        }
        const Setting& s = known_setting(name, node, origin);
        assign(value.settings, s.name, setting_text(s, node, origin));
      }
      if (!value.sweep.empty() && value.label.find("{n}") == std::string::npos)
        fail("{}: axis '{}' value '{}': a sweep's label needs {{n}} (the count)", where_of(v, origin), axis.name,
             value.label);
      if (value.settings.empty()) fail("{}: axis '{}' value '{}' sets nothing", where_of(v, origin), axis.name, value.label);
    } else {
      if (plain == nullptr)
        fail("{}: axis '{}' is not a setting: its values must be tables with a label and settings", where_of(v, origin),
             axis.name);
      value.label = setting_text(*plain, v, origin);
      assign(value.settings, plain->name, value.label);
    }
    if (value.label.empty() || value.label.find_first_of(" ,=#\n") != std::string::npos)
      fail("{}: axis '{}' label '{}': must be non-empty without spaces, ',', '=' or '#'", where_of(v, origin), axis.name,
           value.label);
    if (!labels.insert(value.label).second)
      fail("{}: axis '{}' has the value '{}' twice", where_of(v, origin), axis.name, value.label);
    axis.values.push_back(std::move(value));
  }
  return axis;
}

// `where = { axis = "label" | ["label", ...], ... }`
std::map<std::string, std::vector<std::string>> parse_where(const toml::node& where, const char* what,
                                                            const std::string& origin) {
  std::map<std::string, std::vector<std::string>> out;
  const auto* table = where.as_table();
  if (table == nullptr) fail("{}: {} 'where' must be a table of axis = label", where_of(where, origin), what);
  for (const auto& [key, node] : *table) {
    const std::string axis(key.str());
    if (const auto* list = node.as_array()) {
      for (const auto& label : *list) out[axis].push_back(scalar_text(label, axis, origin));
      if (list->empty()) fail("{}: {} where.{}: an empty list matches nothing", where_of(node, origin), what, axis);
    } else {
      out[axis].push_back(scalar_text(node, axis, origin));
    }
  }
  return out;
}

TimelineSpec parse_timeline(const toml::node& node, const std::string& origin) {
  const auto* t = node.as_table();
  if (t == nullptr) fail("{}: timeline: expected a table [timeline]", where_of(node, origin));
  TimelineSpec spec;
  spec.enabled = true;
  for (const auto& [key, value] : *t) {
    const std::string name(key.str());
    if (name == "where") {
      spec.where = parse_where(value, "[timeline]", origin);
    } else if (name == "duration_s") {
      const auto d = value.value<double>();
      if (!d || !(*d >= 0.01 && *d <= kMaxTimelineSeconds))
        fail("{}: [timeline] duration_s: a number of seconds, 0.01..{}", where_of(value, origin), kMaxTimelineSeconds);
      spec.duration_s = *d;
    } else {
      fail("{}: [timeline]: unknown key '{}' (keys: where, duration_s)", where_of(value, origin), name);
    }
  }
  return spec;
}

GoalSpec parse_goal(const toml::node& node, const std::string& origin) {
  const auto* t = node.as_table();
  if (t == nullptr) fail("{}: goal: expected a table [goal]", where_of(node, origin));
  GoalSpec goal;
  goal.enabled = true;
  const auto positive = [&](const toml::node& value, const std::string& name) {
    const auto d = value.value<double>();
    if (!d || !(*d > 0) || *d > 1e12) fail("{}: [goal] {}: a positive number", where_of(value, origin), name);
    return *d;
  };
  for (const auto& [key, value] : *t) {
    const std::string name(key.str());
    if (name == "text") {
      goal.text = required_string(*t, "text", "[goal]", origin);
    } else if (name == "where") {
      goal.where = parse_where(value, "[goal]", origin);
    } else if (name == "max_worst_wait_ms") {
      goal.max_worst_wait_ms = positive(value, name);
    } else if (name == "min_throughput_ratio") {
      goal.min_throughput_ratio = positive(value, name);
    } else if (name == "min_ops_per_sec") {
      goal.min_ops_per_sec = positive(value, name);
    } else if (name == "relative_to") {
      goal.relative_to = required_string(*t, "relative_to", "[goal]", origin);
    } else {
      fail("{}: [goal]: unknown key '{}' (keys: text, where, max_worst_wait_ms, min_throughput_ratio, relative_to, "
           "min_ops_per_sec)",
           where_of(value, origin), name);
    }
  }
  if (goal.text.empty()) fail("{}: [goal] needs 'text': the goal in words", where_of(node, origin));
  if (goal.min_throughput_ratio.has_value() != !goal.relative_to.empty())
    fail("{}: [goal]: min_throughput_ratio and relative_to go together", where_of(node, origin));
  if (!goal.max_worst_wait_ms && !goal.min_throughput_ratio && !goal.min_ops_per_sec)
    fail("{}: [goal] states no bound (max_worst_wait_ms, min_throughput_ratio or min_ops_per_sec)",
         where_of(node, origin));
  return goal;
}

Claim parse_claim(const toml::table& t, const std::string& origin) {
  Claim c;
  c.text = required_string(t, "text", "[[claim]]", origin);
  c.source = optional_string(t, "source", "[[claim]]", origin);
  c.kind = optional_string(t, "kind", "[[claim]]", origin, "ratio");
  c.expect = required_string(t, "expect", "[[claim]]", origin);
  if (const auto* where = t.get("where")) c.where = parse_where(*where, "claim", origin);
  if (c.kind == "ratio") {
    c.metric = optional_string(t, "metric", "[[claim]]", origin, c.metric);
    c.axis = optional_string(t, "axis", "[[claim]]", origin, c.axis);
    c.a = required_string(t, "a", "[[claim]]", origin);
    c.b = required_string(t, "b", "[[claim]]", origin);
    if (c.expect != "a>b" && c.expect != "a<b" && c.expect != "a~b")
      fail("{}: claim expect '{}': a>b, a<b or a~b for a ratio claim", where_of(t, origin), c.expect);
    if (const auto* node = t.get("factor")) {
      const auto d = node->value<double>();
      if (!d || !std::isfinite(*d) || !(*d > 0) || *d > kMaxClaimFactor)
        fail("{}: [[claim]].factor: a number above 0, at most {} (compare a with factor x b)", where_of(*node, origin),
             kMaxClaimFactor);
      c.factor = *d;
    }
  } else if (c.kind == "outcome") {
    c.outcome = required_string(t, "outcome", "[[claim]]", origin);
    if (!is_point_outcome(c.outcome) && c.outcome != kNoReport)
      fail("{}: claim outcome {:?}: not an outcome of a point ({}, or {} for a VM without a report)",
           where_of(*t.get("outcome"), origin), c.outcome, point_outcomes_text(), kNoReport);
    if (c.expect != "some" && c.expect != "none")
      fail("{}: claim expect '{}': some or none for an outcome claim", where_of(t, origin), c.expect);
  } else if (c.kind == "level") {
    c.metric = required_string(t, "metric", "[[claim]]", origin);
    c.axis = optional_string(t, "axis", "[[claim]]", origin, c.axis);
    c.a = required_string(t, "a", "[[claim]]", origin);
    const auto number = [&](const char* key) {
      const auto* node = t.get(key);
      if (node == nullptr) fail("{}: a level claim expecting '{}' needs '{}'", where_of(t, origin), c.expect, key);
      const auto d = node->value<double>();
      if (!d || !std::isfinite(*d)) fail("{}: [[claim]].{}: expected a number", where_of(*node, origin), key);
      return *d;
    };
    if (c.expect == "above") {
      c.low = number("value");
    } else if (c.expect == "below") {
      c.high = number("value");
    } else if (c.expect == "between") {
      c.low = number("low");
      c.high = number("high");
      if (!(c.low < c.high)) fail("{}: level claim: low {} is not below high {}", where_of(t, origin), c.low, c.high);
    } else {
      fail("{}: claim expect '{}': above, below or between for a level claim", where_of(t, origin), c.expect);
    }
  } else {
    fail("{}: claim kind '{}': ratio, outcome or level", where_of(t, origin), c.kind);
  }
  if (c.kind != "ratio" && t.get("factor") != nullptr)
    fail("{}: [[claim]].factor: only a ratio claim compares a with factor x b", where_of(t, origin));
  if (c.kind != "outcome" && find_metric(c.metric) == nullptr)
    fail("{}: claim metric '{}': not a metric of the summary (lockvisor lab's metric table)", where_of(t, origin),
         c.metric);
  return c;
}

// Where a setting of a scenario is given, for check_set_once.
struct GivenAt {
  std::string place;  // "[fixed] at FILE:LINE", "axis 'lock' at FILE:LINE"
  bool axis = false;
};

// A setting is given in one place: [fixed] (or a [[vm]] table), or one axis.
// A value of a composite axis may give a setting of [fixed] its own value
// ([fixed] is then the default of the values that do not); an axis that sets
// it in every value, or two axes that both set it, would have one value
// silently win over the other. `given` holds where each setting was given so
// far; the axis's are added.
void check_set_once(const Axis& axis, const std::string& where, std::map<std::string, GivenAt>& given) {
  std::set<std::string> any, every;
  for (const auto& [name, value] : axis.values.front().settings) every.insert(name);
  for (const auto& v : axis.values) {
    std::set<std::string> mine;
    for (const auto& [name, value] : v.settings) mine.insert(name);
    any.insert(mine.begin(), mine.end());
    std::erase_if(every, [&](const std::string& name) { return !mine.count(name); });
  }
  const auto here = fmt::format("axis '{}' at {}", axis.name, where);
  for (const auto& name : any) {
    const auto before = given.find(name);
    if (before != given.end() && (before->second.axis || every.count(name)))
      fail("{}: the setting '{}' is given twice: by {} and by {}; give it in one place", where, name,
           before->second.place, here);
    given[name] = {here, true};
  }
}

const Axis* find_axis(const std::vector<Axis>& axes, const std::string& name) {
  for (const auto& a : axes)
    if (a.name == name) return &a;
  return nullptr;
}

bool has_label(const Axis& axis, const std::string& label) {
  for (const auto& v : axis.values)
    if (v.label == label) return true;
  return false;
}

void check_where(const std::vector<Axis>& axes, const std::map<std::string, std::vector<std::string>>& where,
                 const std::string& what, const std::string& origin) {
  for (const auto& [axis, labels] : where) {
    const Axis* a = find_axis(axes, axis);
    if (a == nullptr) fail("{}: {}: where names no axis '{}'", origin, what, axis);
    for (const auto& label : labels)
      if (!has_label(*a, label)) fail("{}: {}: axis '{}' has no value '{}'", origin, what, axis, label);
  }
}

// Claims name axes and labels; a typo would otherwise make a claim match nothing.
void check_claims(const Scenario& s, const std::string& origin) {
  // The axes the summary has: the scenario's, and "vm" for a multi-VM one.
  auto axes = s.axes;
  if (!s.vms.empty()) axes.push_back(vm_axis(s));
  if (s.timeline.enabled) check_where(s.axes, s.timeline.where, "[timeline]", origin);
  if (s.goal.enabled) {
    check_where(axes, s.goal.where, "[goal]", origin);
    if (!s.goal.relative_to.empty()) {
      const auto compared = compared_axis(s);
      const Axis* axis = find_axis(axes, compared);
      if (axis == nullptr || !has_label(*axis, s.goal.relative_to))
        fail("{}: [goal] relative_to '{}': not a value of the axis '{}'", origin, s.goal.relative_to, compared);
    }
  }
  for (const auto& c : s.claims) {
    check_where(axes, c.where, fmt::format("claim '{}'", c.text), origin);
    if (c.kind == "ratio" || c.kind == "level") {
      const Axis* a = find_axis(axes, c.axis);
      if (a == nullptr) fail("{}: claim '{}': no axis '{}'", origin, c.text, c.axis);
      std::vector<std::string> named{c.a};  // a level claim has no b
      if (c.kind == "ratio") named.push_back(c.b);
      for (const auto& v : named)
        if (!has_label(*a, v)) fail("{}: claim '{}': axis '{}' has no value '{}'", origin, c.text, c.axis, v);
    }
  }
}

}  // namespace

std::string read_scenario_file(const std::string& path) {
  // Checked on the path first, so that opening a FIFO cannot block; then on
  // the descriptor (the path may have been swapped in between), and the read
  // stops one byte past the limit whatever the size said.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail("--scenario {}: cannot read: {}", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail("--scenario {}: not a regular file", path);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd.valid()) fail("--scenario {}: cannot read: {}", path, std::strerror(errno));
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) fail("--scenario {}: not a regular file", path);
  const auto too_big = [&] {
    fail("--scenario {}: larger than {} KiB: not a scenario", path, kMaxScenarioBytes >> 10);
  };
  if (static_cast<std::uint64_t>(st.st_size) > kMaxScenarioBytes) too_big();
  std::string text;
  char buffer[16384];
  for (;;) {
    const auto n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("--scenario {}: cannot read: {}", path, std::strerror(errno));
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > kMaxScenarioBytes) too_big();
  }
  if (text.empty())
    fail("--scenario {}: the file is empty: a scenario has a name and [[axis]] tables (docs/lab-example.toml)", path);
  return text;
}

Scenario parse_scenario(const std::string& text, const std::string& origin) {
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    fail("{}:{}: {}", origin, e.source().begin.line, e.description());
  }
  Scenario s;
  // Where each setting is given: [fixed], a [[vm]] table, or an axis that
  // sets it (for check_set_once).
  std::map<std::string, GivenAt> given_at;
  static const std::set<std::string> kKeys = {"name",  "title", "description", "platform_note", "repeats",
                                              "native", "fixed", "vm",          "axis",          "claim",
                                              "timeline", "goal", "needs", "compare"};
  for (const auto& [key, node] : root)
    if (!kKeys.count(std::string(key.str())))
      fail("{}: unknown key '{}' (keys: name, title, description, platform_note, repeats, native, [fixed], [[vm]], "
           "[[axis]], [[claim]], [timeline], [goal], needs, compare)",
           where_of(node, origin), key.str());
  s.name = required_string(root, "name", "the scenario", origin);
  if (s.name.empty() || s.name.size() > kMaxNameLength || s.name.find_first_not_of(kNameCharacters) != std::string::npos)
    fail("{}: name {:?}: 1-{} characters of A-Z a-z 0-9 _ . - (it names the lab in files and reports)",
         where_of(*root.get("name"), origin), s.name, kMaxNameLength);
  s.title = optional_string(root, "title", "the scenario", origin, s.name);
  s.description = optional_string(root, "description", "the scenario", origin);
  s.platform_note = optional_string(root, "platform_note", "the scenario", origin);
  if (const auto* node = root.get("repeats")) {
    auto r = node->value_exact<std::int64_t>();
    if (!r || *r < 1 || *r > kMaxRepeats) fail("{}: repeats: an integer 1..{}", where_of(*node, origin), kMaxRepeats);
    s.repeats = static_cast<unsigned>(*r);
  }
  if (const auto* node = root.get("native")) {
    auto b = node->value_exact<bool>();
    if (!b) fail("{}: native: true or false", where_of(*node, origin));
    s.native = *b;
  }
  if (const auto* node = root.get("fixed")) {
    const auto* table = node->as_table();
    if (table == nullptr) fail("{}: fixed: expected a table [fixed]", where_of(*node, origin));
    for (const auto& [key, value] : *table) {
      const Setting& setting = known_setting(std::string(key.str()), value, origin);
      assign(s.fixed, setting.name, setting_text(setting, value, origin));
      given_at[setting.name] = {fmt::format("[fixed] at {}", where_of(value, origin))};
    }
  }
  if (const auto* node = root.get("vm")) {
    const auto* array = node->as_array();
    if (array == nullptr || !array->is_array_of_tables()) fail("{}: vm: expected [[vm]] tables", where_of(*node, origin));
    for (const auto& v : *array) {
      auto vm = parse_vm(*v.as_table(), origin);
      if (is_vm_label(s.vms, vm.label)) fail("{}: [[vm]] label '{}' appears twice", where_of(v, origin), vm.label);
      // Every VM appears in the point's settings, also one without settings
      // of its own: the label entry (settings.h, run_arguments).
      assign(s.fixed, vm_setting_name(vm.label, "label"), vm.label);
      for (const auto& [name, value] : vm.settings) {
        assign(s.fixed, name, value);
        given_at[name] = {fmt::format("[[vm]] '{}' at {}", vm.label, where_of(v, origin))};
      }
      s.vms.push_back(std::move(vm));
    }
    if (s.vms.size() == 1) fail("{}: one [[vm]] is no multi-VM point: give two or more, or none", origin);
    if (s.native) fail("{}: native twins run no VMs: native = true and [[vm]] cannot be combined", origin);
  }
  if (const auto* node = root.get("axis")) {
    const auto* array = node->as_array();
    if (array == nullptr || !array->is_array_of_tables()) fail("{}: axis: expected [[axis]] tables", where_of(*node, origin));
    std::set<std::string> names;
    for (const auto& a : *array) {
      auto axis = parse_axis(*a.as_table(), s.vms, origin);
      if (!names.insert(axis.name).second) fail("{}: axis '{}' appears twice", where_of(a, origin), axis.name);
      check_set_once(axis, where_of(a, origin), given_at);
      if (!s.vms.empty() && axis.name == "vm") fail("{}: axis 'vm' is the [[vm]] tables' own", where_of(a, origin));
      s.axes.push_back(std::move(axis));
    }
  }
  if (s.axes.empty()) fail("{}: the scenario has no [[axis]]", origin);
  if (const auto* node = root.get("claim")) {
    const auto* array = node->as_array();
    if (array == nullptr || !array->is_array_of_tables()) fail("{}: claim: expected [[claim]] tables", where_of(*node, origin));
    for (const auto& c : *array) s.claims.push_back(parse_claim(*c.as_table(), origin));
  }
  if (const auto* node = root.get("timeline")) {
    s.timeline = parse_timeline(*node, origin);
    if (!s.vms.empty()) fail("{}: [timeline] traces one VM; a scenario with [[vm]] tables cannot have it", origin);
  }
  if (const auto* node = root.get("goal")) s.goal = parse_goal(*node, origin);
  if (const auto* node = root.get("needs")) {
    const auto* array = node->as_array();
    if (array == nullptr) fail("{}: needs: expected an array of setting names", where_of(*node, origin));
    for (const auto& n : *array) {
      const auto name = n.value_exact<std::string>();
      if (!name) fail("{}: needs: expected setting names (strings)", where_of(n, origin));
      s.needs.push_back(known_setting(*name, n, origin).name);
    }
  }
  if (const auto* node = root.get("compare")) {
    const auto name = node->value_exact<std::string>();
    const bool vm = name && *name == "vm" && !s.vms.empty();
    if (!name || (!vm && find_axis(s.axes, *name) == nullptr))
      fail("{}: compare: the name of an axis of this scenario", where_of(*node, origin));
    s.compare = *name;
  }
  if (s.native) add_native_twins(s);  // before the claims, which may name its axis
  check_claims(s, origin);
  return s;
}

std::string compared_axis(const Scenario& s) {
  if (!s.compare.empty()) return s.compare;
  return s.vms.empty() ? "lock" : "vm";
}

const char* throughput_unit(const Scenario& s) {
  const bool linux_guest = lookup(s.fixed, "kernel") != nullptr ||
                           std::find(s.needs.begin(), s.needs.end(), "kernel") != s.needs.end();
  return linux_guest ? "ops/s" : "acq/s";
}

void apply_overrides(Scenario& s, const SettingValues& overrides, const std::string& origin) {
  for (const auto& [name, value] : overrides) {
    const Setting* setting = find_setting(name);
    if (setting == nullptr) {
      std::string names;
      for (const auto& k : settings()) names += (names.empty() ? "" : ", ") + std::string(k.name);
      fail("--set {}: not a lab setting (settings: {})", name, names);
    }
    for (const auto& a : s.axes)
      for (const auto& v : a.values)
        if (lookup(v.settings, name) != nullptr)
          fail("--set {}: {}: the axis '{}' sets it (each of its values gives it its own)", name, origin, a.name);
    if (setting->flag && value != "true" && value != "false") fail("--set {}={}: expected true or false", name, value);
    try {
      check_placement_word(name, value);
    } catch (const Error& e) {
      fail("--set {}={}: {}", name, value, e.what());
    }
    assign(s.fixed, name, value);
  }
  for (const auto& need : s.needs)
    if (lookup(s.fixed, need) == nullptr)
      fail("{} needs the setting '{}': give {}--set {}=VALUE", origin, need, need == "kernel" ? "--kernel FILE or " : "",
           need);
}

Axis vm_axis(const Scenario& s) {
  Axis axis{"vm", {}};
  for (const auto& vm : s.vms) axis.values.push_back({vm.label, vm.settings, {}});
  return axis;
}

void add_native_twins(Scenario& s) {
  for (const auto& a : s.axes)
    if (a.name == "mode") return;  // the scenario has its own
  Axis mode{"mode", {{"guest", {{"native", "false"}}, {}}, {"native", {{"native", "true"}}, {}}}};
  s.axes.push_back(std::move(mode));
}

std::string described(const Scenario& s) {
  if (s.changed.empty()) return s.description;
  return fmt::format("{}\n\n*This lab changed the scenario: {}. The text above gives the scenario's own settings; "
                     "the tables below are this lab's.*",
                     s.description, s.changed);
}

}  // namespace lockvisor::lab
