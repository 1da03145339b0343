// The CPL3 guard's plumbing: parsing objdump's output, finding the regions
// and the symbol each instruction belongs to, running objdump, formatting.
// The rules themselves are in cpl3_rules.cpp.
#include "cpl3_guard.h"

#include <cxxabi.h>
#include <sys/wait.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <memory>

namespace lockvisor::guest_image {
namespace {

using namespace std::literals;

constexpr std::array<std::string_view, 6> kMarkers = {"__cpl0_text_start",     "__cpl0_text_end",
                                                      "__doorbell_text_start", "__doorbell_text_end",
                                                      "__fault_text_start",    "__fault_text_end"};

bool parse_hex(std::string_view s, std::uint64_t& value) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value, 16);
  return ec == std::errc{} && end == s.data() + s.size();
}

std::string hex(std::uint64_t v) {
  std::array<char, 16> buf{};
  const auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v, 16);
  return "0x" + std::string(buf.data(), end);
}

// Splits on '\n'; the last line may lack one.
template <typename F>
void for_each_line(std::string_view text, F&& f) {
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    f(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
}

// Drops objdump's "# 100095 <label>" comment, collapses blanks, trims.
std::string normalize(std::string_view insn) {
  insn = insn.substr(0, insn.find('#'));
  std::string out;
  bool blank = false;
  for (const char c : insn) {
    if (c == ' ' || c == '\t') {
      blank = !out.empty();
      continue;
    }
    if (blank) out += ' ';
    blank = false;
    out += c;
  }
  return out;
}

std::string demangle(const std::string& name) {
  struct FreeDeleter {
    void operator()(char* p) const noexcept { std::free(p); }
  };
  int status = 0;
  const std::unique_ptr<char, FreeDeleter> out(
      ::abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status));
  return status == 0 && out ? std::string(out.get()) : name;
}

// popen(3) under RAII: pclose runs on every path; close() reports the status.
struct PcloseDeleter {
  void operator()(FILE* f) const noexcept { ::pclose(f); }
};
using Pipe = std::unique_ptr<FILE, PcloseDeleter>;

std::string shell_quote(std::string_view s) {
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? "'\\''"s : std::string(1, c);
  return out + "'";
}

std::string run_objdump(const std::string& objdump, std::string_view args, const std::filesystem::path& elf) {
  const std::string command =
      "LC_ALL=C " + shell_quote(objdump) + " " + std::string(args) + " " + shell_quote(elf.string());
  Pipe pipe(::popen(command.c_str(), "r"));
  if (!pipe) throw GuardError("cannot run: " + command);
  std::string out;
  std::array<char, 65536> buf;
  for (std::size_t n; (n = std::fread(buf.data(), 1, buf.size(), pipe.get())) > 0;) out.append(buf.data(), n);
  const int status = ::pclose(pipe.release());
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw GuardError("failed (status " + std::to_string(status) + "): " + command);
  return out;
}

}  // namespace

std::string_view region_name(Region r) {
  constexpr std::array<std::string_view, kRegionCount> kNames = {"cpl0", "doorbell", "fault", "cpl3"};
  return kNames.at(static_cast<std::size_t>(r));
}

bool is_region_marker(std::string_view name) {
  return std::find(kMarkers.begin(), kMarkers.end(), name) != kMarkers.end();
}

// Lines look like (address, 7 flag columns, section, TAB, size, name):
//   0000000000100190 l     F .text	000000000000011c _ZN5guest12_GLOBAL__N_18find_argEPKc
// File ('f') and debugging/section ('d') symbols are skipped.
std::vector<Symbol> parse_symbol_table(std::string_view objdump_t) {
  std::vector<Symbol> symbols;
  for_each_line(objdump_t, [&](std::string_view line) {
    Symbol s;
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos || space < 8 || !parse_hex(line.substr(0, space), s.address)) return;
    if (line.size() < space + 9 || line[space + 8] != ' ') return;
    const std::string_view flags = line.substr(space + 1, 7);
    if (flags[5] == 'd' || flags[6] == 'f') return;
    std::string_view rest = line.substr(space + 9);
    const std::size_t tab = rest.find('\t');
    if (tab == std::string_view::npos) return;
    s.section = std::string(rest.substr(0, tab));
    rest.remove_prefix(tab + 1);
    const std::size_t size_end = rest.find(' ');
    if (size_end == std::string_view::npos || !parse_hex(rest.substr(0, size_end), s.size)) return;
    rest.remove_prefix(size_end + 1);
    for (const std::string_view vis : {".hidden "sv, ".protected "sv, ".internal "sv})
      if (rest.starts_with(vis)) rest.remove_prefix(vis.size());
    s.name = std::string(rest);
    s.is_function = flags[6] == 'F';
    symbols.push_back(std::move(s));
  });
  return symbols;
}

// Lines look like "  100000:\tmov    %rdi,%r12"; also "Disassembly of
// section .text:", "0000000000100000 <_start>:", "\t..." (skipped zeros).
std::vector<Instruction> parse_disassembly(std::string_view objdump_d) {
  std::vector<Instruction> insns;
  std::string section;
  for_each_line(objdump_d, [&](std::string_view line) {
    constexpr std::string_view kHeader = "Disassembly of section ";
    if (line.starts_with(kHeader)) {
      line.remove_prefix(kHeader.size());
      if (line.ends_with(':')) line.remove_suffix(1);
      section = std::string(line);
      return;
    }
    const std::size_t colon = line.find(":\t");
    if (colon == std::string_view::npos) return;
    std::string_view address = line.substr(0, colon);
    address.remove_prefix(std::min(address.find_first_not_of(' '), address.size()));
    Instruction insn;
    if (!parse_hex(address, insn.address)) return;
    insn.text = normalize(line.substr(colon + 2));
    if (insn.text.empty()) return;
    insn.section = section;
    insns.push_back(std::move(insn));
  });
  return insns;
}

Region Regions::classify(std::uint64_t a) const {
  if (a >= cpl0_start && a < cpl0_end) return Region::kCpl0;
  if (a >= doorbell_start && a < doorbell_end) return Region::kDoorbell;
  if (a >= fault_start && a < fault_end) return Region::kFault;
  return Region::kCpl3;
}

Regions find_regions(std::span<const Symbol> symbols) {
  std::array<std::uint64_t, kMarkers.size()> at{};
  for (std::size_t i = 0; i < kMarkers.size(); ++i) {
    const auto it =
        std::find_if(symbols.begin(), symbols.end(), [&](const Symbol& s) { return s.name == kMarkers[i]; });
    if (it == symbols.end())
      throw GuardError("missing symbol " + std::string(kMarkers[i]) +
                       ": not an image linked with guest/arch/x86/linker.ld");
    at[i] = it->address;
  }
  if (!std::is_sorted(at.begin(), at.end()))
    throw GuardError("the text regions are out of order (cpl0, doorbell, fault expected)");
  return {at[0], at[1], at[2], at[3], at[4], at[5]};
}

Attribution attribute(std::span<const Symbol> symbols, std::string_view section, std::uint64_t address) {
  const Symbol* function = nullptr;  // innermost sized function covering the address
  const Symbol* nearest = nullptr;   // closest symbol at or below (functions win ties)
  const Symbol* marker = nullptr;    // closest region marker at or below
  for (const Symbol& s : symbols) {
    if (s.section != section || s.address > address) continue;
    if (is_region_marker(s.name)) {
      if (!marker || s.address > marker->address) marker = &s;
      continue;
    }
    if (s.is_function && address - s.address < s.size && (!function || s.address > function->address))
      function = &s;
    if (!nearest || s.address > nearest->address ||
        (s.address == nearest->address && s.is_function && !nearest->is_function))
      nearest = &s;
  }
  const Symbol* best = function ? function : nearest ? nearest : marker;
  if (!best) return {};
  return {best->name, address - best->address};
}

Report check(std::span<const Symbol> symbols, std::span<const Instruction> instructions,
             const Options& options) {
  const Regions regions = find_regions(symbols);
  Report report;
  for (const Instruction& insn : instructions) {
    const Region region = regions.classify(insn.address);
    ++report.summary.instructions[static_cast<std::size_t>(region)];
    std::optional<Finding> finding = check_instruction(insn.text, region, options.ports);
    if (!finding) continue;
    Attribution where = attribute(symbols, insn.section, insn.address);
    report.violations.push_back({insn.address, region, finding->rule, std::move(where.symbol), where.offset,
                                 insn.text, std::move(finding->detail)});
  }

  auto& bytes = report.summary.bytes;
  bytes[static_cast<std::size_t>(Region::kCpl0)] = regions.cpl0_end - regions.cpl0_start;
  bytes[static_cast<std::size_t>(Region::kDoorbell)] = regions.doorbell_end - regions.doorbell_start;
  const std::uint64_t fault_bytes = regions.fault_end - regions.fault_start;
  bytes[static_cast<std::size_t>(Region::kFault)] = fault_bytes;
  for (const Symbol& s : symbols)
    if (s.address >= regions.fault_start && s.address < regions.fault_end && !is_region_marker(s.name))
      report.summary.fault_symbols.push_back(s.name);
  if (fault_bytes > options.max_fault_region_bytes)
    report.violations.push_back(
        {regions.fault_start, Region::kFault, Rule::kFaultRegionTooLarge, "__fault_text_start", 0, "",
         std::to_string(fault_bytes) + " bytes > " + std::to_string(options.max_fault_region_bytes)});
  return report;
}

Report check_elf(const std::filesystem::path& elf, const std::string& objdump, const Options& options) {
  if (!std::filesystem::is_regular_file(elf)) throw GuardError("no such file: " + elf.string());
  // Symbols first: an image without the region markers fails fast.
  const std::vector<Symbol> symbols = parse_symbol_table(run_objdump(objdump, "-t", elf));
  find_regions(symbols);
  const std::vector<Instruction> insns =
      parse_disassembly(run_objdump(objdump, "-d --no-show-raw-insn -M att", elf));
  if (insns.empty()) throw GuardError("objdump found no code in " + elf.string());
  return check(symbols, insns, options);
}

std::string format_violation(const Violation& v) {
  std::string out = hex(v.address) + " " + std::string(region_name(v.region)) + " <" +
                    (v.symbol.empty() ? "?"s : demangle(v.symbol)) + "+" + hex(v.offset) + ">";
  if (!v.instruction.empty()) out += " " + v.instruction;
  out += ": " + std::string(rule_name(v.rule));
  if (!v.detail.empty()) out += " (" + v.detail + ")";
  return out + " -- " + std::string(rule_reason(v.rule));
}

std::string format_summary(const Report& report, const Options& options) {
  const auto& s = report.summary;
  auto n = [&](Region r) { return std::to_string(s.instructions[static_cast<std::size_t>(r)]); };
  auto b = [&](Region r) { return std::to_string(s.bytes[static_cast<std::size_t>(r)]); };
  std::string exempt;
  for (const std::string& name : s.fault_symbols) exempt += (exempt.empty() ? "" : ", ") + demangle(name);
  return "scanned: cpl0 " + n(Region::kCpl0) + " insns/" + b(Region::kCpl0) +
         " bytes (unchecked), doorbell " + n(Region::kDoorbell) + " insns/" + b(Region::kDoorbell) +
         " bytes, cpl3 " + n(Region::kCpl3) + " insns\nexempt: fault region " + n(Region::kFault) +
         " insns/" + b(Region::kFault) + " bytes (limit " + std::to_string(options.max_fault_region_bytes) +
         "), " + std::to_string(s.fault_symbols.size()) + " symbol(s)" +
         (exempt.empty() ? "" : ": " + exempt) + "\nviolations: " + std::to_string(report.violations.size());
}

}  // namespace lockvisor::guest_image
