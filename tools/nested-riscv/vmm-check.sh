#!/usr/bin/env bash
# The RISC-V VMM's check in the nested RISC-V KVM machine (run.sh), for CI:
# `lockvisor conformance --json` and two pvqspinlock torture runs on 4 harts,
# all by the riscv64 lockvisor, checked here on the x86 host: one overcommitted
# (--pcpus 0: every hart's thread on CPU 0) and one spread (--pcpus 0-3: hart
# i on CPU i). Every conformance case must pass; each torture run must
# complete with 0 violations, each hart's halts as the guest counted them
# (pv_halts) equal to KVM's WFI exits and its kicks (pv_kick) equal to the
# kicks the VMM served, each hart's thread on the CPU --pcpus gave it, and
# name riscv64.
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
for pcpus in 0 0-3; do
	machine run "${image[@]}" --workload torture --lock pvqspinlock --vcpus 4 --pcpus "$pcpus" --duration 1 \
		--json "$work/torture-$pcpus.json" --timeout 300
done

python3 - "$work/conformance.json" "$work/torture-0.json" "$work/torture-0-3.json" <<'PY'
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
# --pcpus 0: all four harts on CPU 0; 0-3: hart i on CPU i (x86's spread).
for path, pcpus, cpu_of in ((sys.argv[2], "0", lambda i: "0"), (sys.argv[3], "0-3", str)):
    what = f"torture --pcpus {pcpus}"
    run = load(path, what)
    if run is None:
        continue
    if run.get("arch") != "riscv64":
        failures.append(f"{what}: arch is {run.get('arch')!r}, not riscv64")
    if run.get("outcome") != "completed":
        failures.append(f"{what}: outcome {run.get('outcome')}: {run.get('reason')}")
    if run.get("settings", {}).get("pcpus") != pcpus:
        failures.append(f"{what}: settings.pcpus is {run.get('settings', {}).get('pcpus')!r}")
    if len(run.get("vcpus", [])) != 4:
        failures.append(f"{what}: {len(run.get('vcpus', []))} harts reported, not 4")
    for i, v in enumerate(run.get("vcpus", [])):
        if v.get("affinity") != cpu_of(i):
            failures.append(f"{what}: hart {i} ran on host CPUs {v.get('affinity')!r}, not {cpu_of(i)}")
        guest, pv = v.get("guest"), v.get("pv", {})
        if guest is None:
            failures.append(f"{what}: hart {i} reported no workload statistics")
            continue
        if guest["violations"] != 0:
            failures.append(f"{what}: hart {i}: {guest['violations']} mutual-exclusion violations")
        if guest["pv_halts"] != pv.get("halts"):
            failures.append(f"{what}: hart {i}: the guest counted {guest['pv_halts']} halts, KVM {pv.get('halts')} WFI exits")
        if guest["pv_kick"] != pv.get("kicks_sent"):
            failures.append(f"{what}: hart {i}: the guest counted {guest['pv_kick']} kicks, the VMM {pv.get('kicks_sent')}")
for line in failures:
    print(f"vmm-check: FAIL: {line}", file=sys.stderr)
sys.exit(1 if failures else 0)
PY
rc=$?
[ $rc -eq 0 ] && echo "vmm-check: riscv64 conformance and torture on --pcpus 0 and 0-3 passed"
exit $rc
