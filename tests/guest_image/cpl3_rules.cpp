// The rules of the CPL3 guard: which instructions code running at CPL3 in
// the guest may not contain, and why.
//
// The guest must run on PVM hosts, where guest CPL3 code runs natively
// (only CPL0 is emulated), so anything CPL3 does is what the host CPU does:
//   - `int $n` with n != 3 raises #UD; int3 is the one software interrupt
//     PVM delivers from CPL3;
//   - `cpuid` is not intercepted at CPL3: it returns the host's leaves, not
//     the table the VMM gave KVM (KVM_SET_CPUID2);
//   - `hlt`, `cli`, `sti` raise #GP (PVM discards IOPL at CPL3);
//   - `vmcall`/`vmmcall` never complete, or raise #GP;
//   - `rdtscp` cannot be emulated;
//   - port I/O is allowed only for the ports the TSS I/O bitmap grants,
//     which the VMM builds from lockvisor/abi/doorbell.h's kCpl3PortAccesses.
// Hardware KVM forgives some of these (it intercepts cpuid and hlt, for
// one), so a test run there would not notice: this guard makes the build's
// test suite notice on every machine.
#include <algorithm>
#include <array>
#include <charconv>

#include "cpl3_guard.h"

namespace lockvisor::guest_image {
namespace {

using namespace std::string_view_literals;

struct RuleInfo {
  std::string_view name;
  std::string_view reason;
};

// Indexed by Rule: the name reports use, and the reason the rule exists.
constexpr std::array kRules = {
    RuleInfo{"int-n",
             "PVM delivers only int3 from CPL3: `int $n` (n != 3) raises #UD, and int1/into reach no gate"
             " the guest installs for CPL3"},
    RuleInfo{"cpuid",
             "PVM does not intercept cpuid at CPL3: it returns the host's leaves, not the VMM's table; read"
             " CPUID at CPL0"},
    RuleInfo{"hlt", "hlt at CPL3 raises #GP; ask CPL0 with int3 at the kernel-halt site"},
    RuleInfo{"cli-sti", "cli/sti at CPL3 raise #GP: CPL3 runs with IOPL=0 (PVM discards IOPL at CPL3)"},
    RuleInfo{"vmcall", "vmcall/vmmcall at CPL3 never complete or raise #GP on PVM; ring a doorbell port"},
    RuleInfo{"vm-entry",
             "vmlaunch/vmresume/vmrun enter a nested guest: they fault in a guest without nested"
             " virtualization"},
    RuleInfo{"rdtscp", "rdtscp cannot be emulated on PVM; use rdtsc"},
    RuleInfo{"syscall",
             "the guest installs no syscall/sysenter entry: CPL3 enters CPL0 only by int3 or a doorbell"},
    RuleInfo{"port-io-outside-doorbell",
             "port I/O at CPL3 is decided by the TSS I/O bitmap alone; only .text.doorbell may do it, so"
             " that every access is checked against kCpl3PortAccesses"},
    RuleInfo{"port-io-form",
             "a doorbell is `out %al,$imm8`/`in $imm8,%al` or `out %al,(%dx)`/`in (%dx),%al`; string port"
             " I/O is not one"},
    RuleInfo{"port-not-in-abi",
             "this port and direction are not in kCpl3PortAccesses: the VMM's TSS I/O bitmap denies it, so"
             " it raises #GP"},
    RuleInfo{"port-width",
             "wider than kCpl3PortAccesses grants: the I/O bitmap has one bit per byte, and a wider access"
             " covers ports the bitmap denies (#GP)"},
    RuleInfo{"privileged-return",
             "iret/sysret/sysexit are CPL0's way back to CPL3: sysret/sysexit raise #GP at CPL3, and under"
             " PVM CPL3 must not drive the privilege-switch paths itself"},
    RuleInfo{"system-register",
             "descriptor-table, task, control and debug registers are CPL0-only: #GP at CPL3"},
    RuleInfo{"msr", "rdmsr/wrmsr are CPL0-only: #GP at CPL3"},
    RuleInfo{"invlpg", "TLB invalidation is CPL0-only: #GP at CPL3"},
    RuleInfo{"swapgs", "swapgs is CPL0-only: #GP at CPL3"},
    RuleInfo{"ud",
             "ud0/ud1/ud2 fault on purpose: deliberate faults belong in .text.deliberate_fault, whose size"
             " the guard bounds"},
    RuleInfo{"bad",
             "objdump cannot decode these bytes: data or junk in executable text that the guard cannot"
             " vouch for"},
    RuleInfo{"fault-region-too-large",
             "the exempt .text.deliberate_fault region must stay small, or it becomes a place to hide"
             " ordinary CPL3 code"},
};
static_assert(kRules.size() == static_cast<std::size_t>(Rule::kFaultRegionTooLarge) + 1);

// Mnemonics that break a rule whatever their operands.
struct MnemonicRule {
  std::string_view mnemonic;
  Rule rule;
};
// clang-format off
constexpr std::array kMnemonicRules = {
    MnemonicRule{"int1", Rule::kSoftwareInterrupt}, MnemonicRule{"icebp", Rule::kSoftwareInterrupt},
    MnemonicRule{"into", Rule::kSoftwareInterrupt},
    MnemonicRule{"cpuid", Rule::kCpuid},
    MnemonicRule{"hlt", Rule::kHlt},
    MnemonicRule{"cli", Rule::kInterruptFlag}, MnemonicRule{"sti", Rule::kInterruptFlag},
    MnemonicRule{"vmcall", Rule::kHypercall}, MnemonicRule{"vmmcall", Rule::kHypercall},
    MnemonicRule{"vmlaunch", Rule::kVmEntry}, MnemonicRule{"vmresume", Rule::kVmEntry},
    MnemonicRule{"vmrun", Rule::kVmEntry},
    MnemonicRule{"rdtscp", Rule::kRdtscp},
    MnemonicRule{"syscall", Rule::kSyscall}, MnemonicRule{"sysenter", Rule::kSyscall},
    MnemonicRule{"iret", Rule::kPrivilegedReturn}, MnemonicRule{"iretw", Rule::kPrivilegedReturn},
    MnemonicRule{"iretl", Rule::kPrivilegedReturn}, MnemonicRule{"iretd", Rule::kPrivilegedReturn},
    MnemonicRule{"iretq", Rule::kPrivilegedReturn}, MnemonicRule{"sysret", Rule::kPrivilegedReturn},
    MnemonicRule{"sysretl", Rule::kPrivilegedReturn}, MnemonicRule{"sysretq", Rule::kPrivilegedReturn},
    MnemonicRule{"sysexit", Rule::kPrivilegedReturn}, MnemonicRule{"sysexitl", Rule::kPrivilegedReturn},
    MnemonicRule{"sysexitq", Rule::kPrivilegedReturn},
    MnemonicRule{"lgdt", Rule::kSystemRegister}, MnemonicRule{"lidt", Rule::kSystemRegister},
    MnemonicRule{"lldt", Rule::kSystemRegister}, MnemonicRule{"ltr", Rule::kSystemRegister},
    MnemonicRule{"lmsw", Rule::kSystemRegister}, MnemonicRule{"clts", Rule::kSystemRegister},
    MnemonicRule{"rdmsr", Rule::kMsr}, MnemonicRule{"wrmsr", Rule::kMsr},
    MnemonicRule{"invlpg", Rule::kTlbControl}, MnemonicRule{"invlpga", Rule::kTlbControl},
    MnemonicRule{"invpcid", Rule::kTlbControl},
    MnemonicRule{"swapgs", Rule::kSwapgs},
    MnemonicRule{"ud0", Rule::kDeliberateFault}, MnemonicRule{"ud1", Rule::kDeliberateFault},
    MnemonicRule{"ud1l", Rule::kDeliberateFault}, MnemonicRule{"ud2", Rule::kDeliberateFault},
    MnemonicRule{"(bad)", Rule::kUndecodable},
};
// clang-format on

template <std::size_t N>
bool one_of(std::string_view s, const std::array<std::string_view, N>& set) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

// Prefixes objdump prints before the mnemonic: "rep stos", "lock cmpxchg",
// "data16 cs nopw", "notrack jmp", "rex.W ...", "{vex} ...".
bool is_prefix(std::string_view token) {
  static constexpr std::array<std::string_view, 22> kPrefixes = {
      "lock", "rep",     "repz",     "repe",     "repnz",  "repne",  "cs",     "ds",
      "es",   "fs",      "gs",       "ss",       "data16", "data32", "addr16", "addr32",
      "bnd",  "notrack", "xacquire", "xrelease", "rex",    "rex64"};
  return one_of(token, kPrefixes) || token.starts_with("rex.") || token.starts_with("{");
}

struct Decoded {
  std::string_view mnemonic;
  std::string_view operands;
};

Decoded decode(std::string_view text) {
  while (!text.empty()) {
    const std::size_t space = text.find(' ');
    const std::string_view token = text.substr(0, space);
    const std::string_view rest = space == std::string_view::npos ? ""sv : text.substr(space + 1);
    if (!is_prefix(token)) return {token, rest};
    text = rest;
  }
  return {};  // prefixes only: no instruction
}

bool parse_hex(std::string_view s, std::uint64_t& value) {
  if (s.starts_with("0x")) s.remove_prefix(2);
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value, 16);
  return ec == std::errc{} && end == s.data() + s.size();
}

// %cr0..%cr15, %db0..%db15 (objdump's name for debug registers), %dr0..%dr15.
bool names_system_register(std::string_view operands) {
  for (std::size_t at = operands.find('%'); at != std::string_view::npos; at = operands.find('%', at + 1)) {
    const std::string_view reg = operands.substr(at + 1);
    if ((reg.starts_with("cr") || reg.starts_with("db") || reg.starts_with("dr")) && reg.size() > 2 &&
        reg[2] >= '0' && reg[2] <= '9')
      return true;
  }
  return false;
}

constexpr std::array<std::string_view, 8> kInOut = {"in", "inb", "inw", "inl", "out", "outb", "outw", "outl"};
constexpr std::array<std::string_view, 10> kStringIo = {"ins",  "insb",  "insw",  "insl",  "insd",
                                                        "outs", "outsb", "outsw", "outsl", "outsd"};

// The width of an in/out: from its accumulator operand, else its suffix.
unsigned port_width(std::string_view mnemonic, std::string_view reg) {
  if (reg == "%al") return 1;
  if (reg == "%ax") return 2;
  if (reg == "%eax") return 4;
  switch (mnemonic.back()) {
    case 'b':
      return 1;
    case 'w':
      return 2;
    case 'l':
      return 4;
    default:
      return 0;
  }
}

// An in/out inside .text.doorbell, against the ABI's table.
std::optional<Finding> check_doorbell_port(std::string_view mnemonic, std::string_view operands,
                                           std::span<const abi::PortAccess> ports) {
  const bool is_in = mnemonic.starts_with("in");
  const std::size_t comma = operands.find(',');
  if (comma == std::string_view::npos) return Finding{Rule::kPortIoForm, "operands not understood"};
  std::string_view port = operands.substr(0, comma);
  std::string_view reg = operands.substr(comma + 1);
  if (!is_in) std::swap(port, reg);  // out %al,$0xe4: the port comes second
  const unsigned width = port_width(mnemonic, reg);
  const std::string dir = is_in ? "in" : "out";

  if (port == "(%dx)" || port == "%dx") {
    // The port is only known at run time: allowed byte-wide, when the ABI
    // has byte-wide ports in this direction at all.
    if (width != 1) return Finding{Rule::kPortWidth, dir + " (%dx) of width " + std::to_string(width)};
    const bool any = std::any_of(ports.begin(), ports.end(),
                                 [&](const abi::PortAccess& p) { return p.is_in == is_in && p.width == 1; });
    if (!any) return Finding{Rule::kPortNotInAbi, "no byte-wide " + dir + " port in kCpl3PortAccesses"};
    return std::nullopt;
  }
  std::uint64_t number = 0;
  if (!port.starts_with('$') || !parse_hex(port.substr(1), number))
    return Finding{Rule::kPortIoForm, "port operand not understood"};
  bool port_known = false;
  for (const abi::PortAccess& p : ports) {
    if (p.port != number || p.is_in != is_in) continue;
    if (p.width == width) return std::nullopt;
    port_known = true;
  }
  const std::string what = dir + " port " + std::string(port.substr(1)) + " width " + std::to_string(width);
  if (port_known) return Finding{Rule::kPortWidth, what + ": kCpl3PortAccesses grants another width"};
  return Finding{Rule::kPortNotInAbi, what + ": not in kCpl3PortAccesses"};
}

}  // namespace

std::string_view rule_name(Rule r) { return kRules.at(static_cast<std::size_t>(r)).name; }
std::string_view rule_reason(Rule r) { return kRules.at(static_cast<std::size_t>(r)).reason; }

std::optional<Finding> check_instruction(std::string_view text, Region region,
                                         std::span<const abi::PortAccess> ports) {
  // CPL0 code may do anything; the fault region is exempt (and bounded).
  if (region == Region::kCpl0 || region == Region::kFault) return std::nullopt;
  const auto [mnemonic, operands] = decode(text);
  if (mnemonic.empty()) return std::nullopt;

  if (one_of(mnemonic, kStringIo))
    return Finding{region == Region::kDoorbell ? Rule::kPortIoForm : Rule::kPortIoOutsideDoorbell, ""};
  if (one_of(mnemonic, kInOut)) {
    if (region != Region::kDoorbell) return Finding{Rule::kPortIoOutsideDoorbell, ""};
    return check_doorbell_port(mnemonic, operands, ports);
  }
  if (mnemonic == "int") {
    // CD 03 (objdump: "int $0x3") is vector 3 like int3, which PVM delivers.
    std::uint64_t vector = 0;
    if (operands.starts_with('$') && parse_hex(operands.substr(1), vector) && vector == 3)
      return std::nullopt;
    return Finding{Rule::kSoftwareInterrupt, "vector " + std::string(operands)};
  }
  if (mnemonic.starts_with("mov") && names_system_register(operands))
    return Finding{Rule::kSystemRegister, ""};
  for (const MnemonicRule& m : kMnemonicRules)
    if (m.mnemonic == mnemonic) return Finding{m.rule, ""};
  return std::nullopt;
}

}  // namespace lockvisor::guest_image
