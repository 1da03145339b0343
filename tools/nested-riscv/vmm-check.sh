#!/usr/bin/env bash
# The RISC-V VMM's check in the nested RISC-V KVM machine (run.sh), for CI:
# `lockvisor conformance --json` and a pvqspinlock torture run, both by the
# riscv64 lockvisor, checked here on the x86 host. Every conformance case must
# pass; the torture run must complete with 0 violations, each hart's halts as
# the guest counted them (pv_halts) equal to KVM's WFI exits and its kicks
# (pv_kick) equal to the kicks the VMM served, and name riscv64.
#
# Usage: vmm-check.sh LOCKVISOR_RISCV64_BINARY [GUEST_ELF]
#   GUEST_ELF: run this RV64 guest image instead of the one embedded (--image).
# Exit status: 0 all checks passed; 1 one line per failed check on stderr;
# 2 usage; run.sh's status (124, 125, ...) when the machine itself failed.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
usage() { echo "usage: vmm-check.sh LOCKVISOR_RISCV64_BINARY [GUEST_ELF]" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
bin=$(realpath -e "$1" 2>/dev/null) || { echo "vmm-check: no such binary: $1" >&2; exit 2; }
image=()
if [ $# -eq 2 ]; then
	elf=$(realpath -e "$2" 2>/dev/null) || { echo "vmm-check: no such guest image: $2" >&2; exit 2; }
	image=(--image "$elf")
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/lockvisor-vmm-check.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT

# run.sh's own failures (the machine, not lockvisor) end the check with their status.
machine() {
	local rc
	"$here/run.sh" --smp 4 --timeout 600 --workdir "$work" -- "$bin" "$@" >>"$work/log" 2>&1
	rc=$?
	case $rc in 124|125|126|127|130) echo "vmm-check: run.sh failed ($rc): $(tail -n 3 "$work/log")" >&2; exit "$rc" ;; esac
	return "$rc"
}
machine conformance "${image[@]}" --json "$work/conformance.json"
machine run "${image[@]}" --workload torture --lock pvqspinlock --vcpus 4 --pcpus 0 --duration 2 \
	--json "$work/torture.json" --timeout 300

python3 - "$work/conformance.json" "$work/torture.json" <<'PY'
import json, sys
failures = []
def load(path, what):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        failures.append(f"{what}: no JSON report ({e})")
        return None
conf = load(sys.argv[1], "conformance")
if conf is not None:
    if conf.get("arch") != "riscv64":
        failures.append(f"conformance: arch is {conf.get('arch')!r}, not riscv64")
    if not conf.get("cases"):
        failures.append("conformance: no cases ran")
    for case in conf.get("cases", []):
        if not case.get("passed"):
            failures.append(f"conformance: {case.get('name')}: {case.get('reason')}")
run = load(sys.argv[2], "torture")
if run is not None:
    if run.get("arch") != "riscv64":
        failures.append(f"torture: arch is {run.get('arch')!r}, not riscv64")
    if run.get("outcome") != "completed":
        failures.append(f"torture: outcome {run.get('outcome')}: {run.get('reason')}")
    for i, v in enumerate(run.get("vcpus", [])):
        guest, pv = v.get("guest"), v.get("pv", {})
        if guest is None:
            failures.append(f"torture: hart {i} reported no workload statistics")
            continue
        if guest["violations"] != 0:
            failures.append(f"torture: hart {i}: {guest['violations']} mutual-exclusion violations")
        if guest["pv_halts"] != pv.get("halts"):
            failures.append(f"torture: hart {i}: the guest counted {guest['pv_halts']} halts, KVM {pv.get('halts')} WFI exits")
        if guest["pv_kick"] != pv.get("kicks_sent"):
            failures.append(f"torture: hart {i}: the guest counted {guest['pv_kick']} kicks, the VMM {pv.get('kicks_sent')}")
for line in failures:
    print(f"vmm-check: FAIL: {line}", file=sys.stderr)
sys.exit(1 if failures else 0)
PY
rc=$?
[ $rc -eq 0 ] && echo "vmm-check: riscv64 conformance and torture passed"
exit $rc
