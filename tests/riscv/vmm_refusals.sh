#!/usr/bin/env bash
# The riscv64 lockvisor's refusals that need no KVM, run under qemu-user: each
# x86-only option or subcommand, a bad --sbi-eid and a bad --pcpus (empty,
# malformed, more CPUs than usable, a CPU outside the affinity mask: x86's
# words and refusals) are refused with exactly one line on stderr and exit
# code 2 before anything runs; `locks` lists the registry; `doctor` without
# /dev/kvm says so and fails.
#
# Options of x86's run that riscv64's has not (the timeline, the injector)
# and misspelt ones are refused alike, naming the option.
#
# Usage: vmm_refusals.sh LOCKVISOR_RISCV64_BINARY
set -uo pipefail
bin=${1:?usage: vmm_refusals.sh LOCKVISOR_RISCV64_BINARY}
emu=/usr/bin/qemu-riscv64-static
fail() { echo "vmm_refusals: FAIL: $*" >&2; exit 1; }
[ -x "$emu" ] || fail "$emu missing: tools/install-deps.sh --riscv"
err=$(mktemp) && trap 'rm -f "$err"' EXIT

# refused WANT_TEXT ARGS...: exit 2, one stderr line containing WANT_TEXT.
# With `launch` set (an array), lockvisor runs under that command.
launch=()
refused() {
	local want=$1 rc lines
	shift
	"${launch[@]}" "$emu" "$bin" "$@" >/dev/null 2>"$err"
	rc=$?
	[ "$rc" = 2 ] || fail "lockvisor $* exited $rc, want 2: $(cat "$err")"
	lines=$(wc -l <"$err")
	[ "$lines" = 1 ] || fail "lockvisor $* wrote $lines lines to stderr, want 1: $(cat "$err")"
	grep -qF -- "$want" "$err" || fail "lockvisor $*: '$(cat "$err")' does not say '$want'"
}
refused "Linux guests run on x86-64 only" run --kernel bzImage
refused "eBPF" run --runstate
refused "--backend kvm" run --backend kvm
refused "x86 wake paths" run --pv-wake ipi
refused "x86-64 only" lab
refused "x86-64 only" linux
refused "--trace is not an option of riscv64's run" run --trace x.json
refused "--inject is not an option of riscv64's run" run --workload lockbench --inject periodic:vcpu=0,every=10ms,for=1ms
refused "--lcok is not an option of riscv64's run" run --lcok pvbounded
refused "unexpected argument 'extra'" run extra
refused "--vcpus" run --vcpus many
refused "experimental range" run --sbi-eid 50564c4b
refused "experimental range" run --sbi-eid zz
refused "host CPUs '': empty" run --pcpus ''
refused "host CPUs 'two': expected all, a count" run --pcpus two
refused "bad CPU list '0-'" run --pcpus 0-
refused "asks for 100000 CPUs" run --pcpus 100000cpus
# qemu-user passes the affinity mask through: CPU 1 exists (on 2 CPUs or
# more) but taskset keeps this process off it.
if [ "$(nproc --all)" -ge 2 ]; then
	launch=(taskset -c 0)
	refused "CPU 1 is not allowed for this process" run --pcpus 1
	refused "asks for 2 CPUs, 1 are usable" run --pcpus 2cpus
	launch=()
else
	refused "CPU 1 does not exist" run --pcpus 1
fi

out=$("$emu" "$bin" locks) || fail "lockvisor locks failed"
grep -q '^pvqspinlock ' <<<"$out" || fail "lockvisor locks does not list pvqspinlock: $out"
if [ ! -e /dev/kvm ]; then
	out=$("$emu" "$bin" doctor 2>&1) && fail "doctor without /dev/kvm exited 0: $out"
	grep -qF '/dev/kvm: cannot open' <<<"$out" || fail "doctor does not name /dev/kvm: $out"
fi
echo "vmm_refusals: all refusals as documented"
