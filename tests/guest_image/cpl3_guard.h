// The CPL3 guard: checks that the code the guest image runs at CPL3 uses no
// instruction that PVM hosts cannot run there (see cpl3_rules.cpp for each
// rule and the PVM fact behind it). It works on any machine: it reads the
// image with objdump, classifies every instruction by the text regions that
// guest/arch/x86/linker.ld delimits with symbols, and applies the rules.
//
// The parsing and checking functions are pure (objdump text in, violations
// out) so that the tests can feed them snippets; check_elf() is the one
// function that runs objdump.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "lockvisor/abi/doorbell.h"

namespace lockvisor::guest_image {

// Bad input: objdump failed, or the image lacks the region symbols.
class GuardError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Where an instruction runs, by the linker script's text regions.
enum class Region { kCpl0, kDoorbell, kFault, kCpl3 };
inline constexpr std::size_t kRegionCount = 4;
std::string_view region_name(Region r);

enum class Rule {
  kSoftwareInterrupt,  // int $n (n != 3), int1, into
  kCpuid,              // cpuid
  kHlt,                // hlt
  kInterruptFlag,      // cli, sti
  kHypercall,          // vmcall, vmmcall
  kVmEntry,            // vmlaunch, vmresume, vmrun
  kRdtscp,             // rdtscp
  kSyscall,            // syscall, sysenter
  kPortIoOutsideDoorbell,
  kPortIoForm,           // in the doorbell region: string I/O
  kPortNotInAbi,         // in the doorbell region: port/direction not in kCpl3PortAccesses
  kPortWidth,            // in the doorbell region: wider than the ABI grants
  kPrivilegedReturn,     // iret*, sysret*, sysexit*
  kSystemRegister,       // lgdt, lidt, lldt, ltr, lmsw, clts, mov to/from %cr* / %dr*
  kMsr,                  // rdmsr, wrmsr
  kTlbControl,           // invlpg, invlpga, invpcid
  kSwapgs,               // swapgs
  kDeliberateFault,      // ud0, ud1, ud2
  kUndecodable,          // objdump's "(bad)"
  kFaultRegionTooLarge,  // the exempt region outgrew Options::max_fault_region_bytes
};
std::string_view rule_name(Rule r);    // short, stable: "cpuid", "port-width", ...
std::string_view rule_reason(Rule r);  // why the rule exists, one sentence

// One line of `objdump -t`.
struct Symbol {
  std::uint64_t address = 0;
  std::uint64_t size = 0;
  std::string name;
  std::string section;
  bool is_function = false;  // ELF STT_FUNC ('F')
};

// One line of `objdump -d --no-show-raw-insn -M att`: the text is the
// instruction with objdump's trailing "# ..." comment removed and runs of
// whitespace collapsed to one space ("rep stos %rax,%es:(%rdi)").
struct Instruction {
  std::uint64_t address = 0;
  std::string section;
  std::string text;
};

std::vector<Symbol> parse_symbol_table(std::string_view objdump_t);
std::vector<Instruction> parse_disassembly(std::string_view objdump_d);

// The region bounds, from the linker script's symbols. find_regions throws
// GuardError when a bound is missing or the regions are out of order.
struct Regions {
  std::uint64_t cpl0_start, cpl0_end;
  std::uint64_t doorbell_start, doorbell_end;
  std::uint64_t fault_start, fault_end;
  Region classify(std::uint64_t address) const;
};
Regions find_regions(std::span<const Symbol> symbols);
bool is_region_marker(std::string_view symbol_name);

// The rule, if any, that one instruction breaks in a region. The allowed
// doorbell ports come from `ports` (the ABI's table by default).
struct Finding {
  Rule rule;
  std::string detail;
};
std::optional<Finding> check_instruction(std::string_view text, Region region,
                                         std::span<const abi::PortAccess> ports);

// The symbol an address belongs to: the innermost sized function symbol
// covering it, else the nearest symbol at or below it in the same section
// (region markers only as a last resort).
struct Attribution {
  std::string symbol;  // empty when nothing precedes the address
  std::uint64_t offset = 0;
};
Attribution attribute(std::span<const Symbol> symbols, std::string_view section, std::uint64_t address);

struct Violation {
  std::uint64_t address = 0;
  Region region = Region::kCpl3;
  Rule rule = Rule::kUndecodable;
  std::string symbol;
  std::uint64_t offset = 0;
  std::string instruction;
  std::string detail;
};

struct Summary {
  std::array<std::uint64_t, kRegionCount> instructions{};  // scanned, by Region
  std::array<std::uint64_t, kRegionCount> bytes{};         // region sizes (kCpl3: unknown, 0)
  std::vector<std::string> fault_symbols;                  // exempt functions/labels
};

struct Report {
  std::vector<Violation> violations;
  Summary summary;
  bool clean() const { return violations.empty(); }
};

struct Options {
  // The fault region is exempt from every rule; this bound keeps it from
  // becoming a place to hide ordinary code.
  std::uint64_t max_fault_region_bytes = 512;
  std::span<const abi::PortAccess> ports = abi::kCpl3PortAccesses;
};

// Pure: the whole check on already-parsed objdump output.
Report check(std::span<const Symbol> symbols, std::span<const Instruction> instructions,
             const Options& options = {});

// Runs `objdump -t` and `objdump -d` on the image, then check(). Throws
// GuardError on a missing file, an objdump failure or missing symbols.
Report check_elf(const std::filesystem::path& elf, const std::string& objdump, const Options& options = {});

// "0x101c70 cpl3 <guest::foo()+0x10> int $0x80: int-n (detail) -- reason"
std::string format_violation(const Violation& v);
std::string format_summary(const Report& report, const Options& options = {});

}  // namespace lockvisor::guest_image
