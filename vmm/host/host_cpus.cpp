#include "vmm/host/host_cpus.h"

#include <charconv>
#include <cstdlib>
#include <limits>
#include <string_view>

#include "vmm/host/cpu_set.h"
#include "vmm/util/error.h"
#include "vmm/util/top_level_comma.h"

namespace lockvisor::host {
namespace {

// A whole number without sign, spaces or trailing text.
bool whole_number(std::string_view text, unsigned long& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return !text.empty() && ec == std::errc() && end == text.data() + text.size();
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

std::vector<int> first(const std::vector<int>& usable, unsigned long count, const std::string& word) {
  if (count > usable.size())
    fail("host CPUs '{}': asks for {} CPUs, {} are usable ({})", word, count, usable.size(), format_cpu_list(usable));
  return {usable.begin(), usable.begin() + static_cast<std::ptrdiff_t>(count)};
}

// A fraction p/q of the usable CPUs, rounded down, at least one.
std::vector<int> share(const std::vector<int>& usable, unsigned long p, unsigned long q, const std::string& word) {
  if (q == 0 || p == 0 || p > q) fail("host CPUs '{}': a fraction between 0 and 1 (1/2, 50%)", word);
  const unsigned long count = usable.size() * p / q;
  return first(usable, count == 0 ? 1 : count, word);
}

// The two words of "max(A,B)", split at the comma outside parentheses;
// false when `w` is not of that form.
bool split_max(std::string_view w, std::string_view& a, std::string_view& b) {
  constexpr std::string_view kOpen = "max(";
  if (w.substr(0, kOpen.size()) != kOpen || !ends_with(w, ")")) return false;
  const std::string_view inner = w.substr(kOpen.size(), w.size() - kOpen.size() - 1);
  const std::size_t comma = find_top_level_comma(inner);
  if (comma == std::string_view::npos) return false;
  a = inner.substr(0, comma);
  b = inner.substr(comma + 1);
  return true;
}

// Far above any overcommit worth running; keeps n * CPUs from wrapping.
constexpr unsigned long kMaxRatio = 1024;

}  // namespace

std::vector<int> usable_cpus() {
  const char* declared = std::getenv(kHostCpusVariable);
  if (declared == nullptr || *declared == '\0') return allowed_cpus();
  if (!is_cpu_list(declared)) fail("{}='{}': expected a CPU list (0-15)", kHostCpusVariable, declared);
  return parse_cpu_list(declared);
}

bool is_cpu_list(const std::string& word) {
  return !word.empty() && word.find_first_not_of("0123456789,-") == std::string::npos;
}

std::vector<int> resolve_host_cpus(const std::string& word, const std::vector<int>& usable) {
  if (word.empty()) fail("host CPUs '': empty; expected {}", kHostCpuForms);
  if (is_cpu_list(word)) return parse_cpu_list(word);
  if (usable.empty()) fail("host CPUs '{}': no usable CPUs to take them from", word);
  const std::string_view w(word);
  unsigned long n = 0, d = 0;
  if (word == "all") return usable;
  if (ends_with(w, "cpus") && whole_number(w.substr(0, w.size() - 4), n) && n > 0) return first(usable, n, word);
  if (word == "1cpu") return first(usable, 1, word);
  if (ends_with(w, "%") && whole_number(w.substr(0, w.size() - 1), n)) return share(usable, n, 100, word);
  if (const auto slash = w.find('/');
      slash != std::string_view::npos && whole_number(w.substr(0, slash), n) && whole_number(w.substr(slash + 1), d))
    return share(usable, n, d, word);
  if (std::string_view a, b; split_max(w, a, b)) {
    // Both words take the first usable CPUs, so the larger set holds the
    // smaller: the larger is the answer. A count here is a floor, so on a
    // host with fewer CPUs it is all of them (max(2cpus,1/8) on one CPU is
    // that CPU). A CPU list names fixed CPUs, which no size comparison can
    // mix with a share of the host: refused.
    const auto term = [&](std::string_view t) {
      const std::string text(t);
      if (is_cpu_list(text)) fail("host CPUs '{}': max() compares words (4cpus, 1/8, all), not CPU lists", word);
      if (unsigned long count = 0; ends_with(t, "cpus") && whole_number(t.substr(0, t.size() - 4), count) &&
                                   count > usable.size())
        return usable;
      return resolve_host_cpus(text, usable);
    };
    auto x = term(a);
    auto y = term(b);
    return x.size() >= y.size() ? x : y;
  }
  fail("host CPUs '{}': expected {}", word, kHostCpuForms);
}

std::vector<int> resolve_pcpus_option(const std::string& word) {
  try {
    return resolve_host_cpus(word, is_cpu_list(word) ? std::vector<int>{} : usable_cpus());
  } catch (const Error& e) {
    fail("--pcpus: {}", e.what());
  }
}

bool is_vcpu_ratio(const std::string& word) {
  const std::string_view w(word);
  unsigned long n = 0;
  return ends_with(w, "x") && whole_number(w.substr(0, w.size() - 1), n);
}

unsigned resolve_vcpus(const std::string& word, std::size_t host_cpus) {
  const std::string_view w(word);
  unsigned long n = 0;
  if (whole_number(w, n) && n <= std::numeric_limits<unsigned>::max()) return static_cast<unsigned>(n);
  if (ends_with(w, "x") && whole_number(w.substr(0, w.size() - 1), n) && n > 0 && n <= kMaxRatio) {
    if (host_cpus == 0) fail("vCPUs '{}': a ratio needs host CPUs (pcpus)", word);
    return static_cast<unsigned>(n * host_cpus);
  }
  fail("vCPUs '{}': expected {}", word, kVcpuForms);
}

}  // namespace lockvisor::host
