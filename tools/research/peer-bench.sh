#!/usr/bin/env bash
# Peer benchmark (not a test): the same Debian kernel, the same initramfs
# (lockvisor's, `lockvisor linux initramfs`) and the same kernel command line
# booted by QEMU (-M microvm, -accel kvm) and by lockvisor, alternating, N
# rounds in one session. Per boot: the wall time from starting the VMM to the
# init's first console line, and the workload's operations/s (QEMU's console
# read by `lockvisor linux report`, lockvisor's from its --json). Then the
# medians and lockvisor/QEMU ratios.
# Run where Linux guests run, e.g. inside tools/nested-kvm:
#   tools/nested-kvm/run.sh --smp 1 --mem 3072 --timeout 3000 -- tools/research/peer-bench.sh
# Options: --kernel F (default: the amd64 kernel of fetch-kernels.sh)
#          --vcpus N (2) --rounds N (3) --workload W (futex-hash) --duration S (2)
#          --lockvisor PATH --keep DIR (keep the consoles and reports there)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
kernel=${LOCKVISOR_LINUX_KERNELS:-/var/cache/lockvisor/linux-kernels}/amd64
vcpus=2 rounds=3 workload=futex-hash duration=2 keep=''
lv=$here/../../build/default/vmm/lockvisor
while [ $# -gt 0 ]; do
	[ $# -ge 2 ] || { echo "peer-bench: $1 needs a value" >&2; exit 2; }
	case "$1" in
	--kernel) kernel=$2 ;; --vcpus) vcpus=$2 ;; --rounds) rounds=$2 ;; --workload) workload=$2 ;;
	--duration) duration=$2 ;; --lockvisor) lv=$2 ;; --keep) keep=$2 ;;
	*) echo "peer-bench: unknown option $1" >&2; exit 2 ;;
	esac
	shift 2
done
command -v qemu-system-x86_64 >/dev/null || { echo "peer-bench: no qemu-system-x86_64 (apt-get install qemu-system-x86)" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lockvisor-peer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cmdline=$("$lv" linux initramfs --out "$tmp/init.cpio" --workload "$workload" --duration "$duration" 2>/dev/null)
mem=512
timeout=$((600 + 4 * ${duration%.*}))
now() { date +%s.%N; }

# QEMU's microvm with ACPI (the init powers off through it), no PIT or RTC
# (each would make the guest exit for nothing; docs/linux-guests-nested.md).
# The console goes through a pipe to one reader that notes when the init's
# first line arrives and otherwise sleeps in read(): a poll loop here would
# fork grep and date many times a second on the CPU the vCPUs share, and
# under TCG each fork costs milliseconds the guest then loses.
qemu_round() { # ROUND -> "init_s ops"
	local log=$tmp/qemu-$1.log start init
	start=$(now)
	init=$(timeout --kill-after=5 "$timeout" qemu-system-x86_64 -accel kvm -M microvm,rtc=off,pit=off -cpu host \
		-smp "$vcpus" -m "$mem" -kernel "$kernel" -initrd "$tmp/init.cpio" -append "$cmdline" \
		-nodefaults -no-user-config -serial stdio -display none -no-reboot </dev/null 2>"$log.err" |
		python3 -c 'import sys, time
start, init = float(sys.argv[1]), None
with open(sys.argv[2], "wb") as log:
    for line in sys.stdin.buffer:
        if init is None and line.startswith(b"lockvisor-init: "):
            init = time.time() - start
        log.write(line)
print("none" if init is None else f"{init:.3f}")' "$start" "$log") || true
	"$lv" linux report "$log" --json "$tmp/qemu-$1.json" >"$tmp/qemu-$1.report" 2>&1 || true
	echo "${init:-none} $(python3 -c 'import json,sys
try: print(json.load(open(sys.argv[1]))["ops_per_sec"] or "none")
except Exception: print("none")' "$tmp/qemu-$1.json")"
}

lockvisor_round() { # ROUND -> "init_s ops"
	"$lv" run --kernel "$kernel" --vcpus "$vcpus" --memory "$mem" --workload "$workload" --duration "$duration" \
		--json "$tmp/lockvisor-$1.json" >"$tmp/lockvisor-$1.log" 2>&1 || true
	python3 -c 'import json,sys
try:
    r = json.load(open(sys.argv[1])); print(r["linux"]["seconds_to_init"] or "none", r["ops_per_sec"] or "none")
except Exception: print("none none")' "$tmp/lockvisor-$1.json"
}

echo "peer-bench: $(basename "$kernel"), $vcpus vCPUs, $mem MiB, workload $workload for $duration s, $rounds rounds; host: $(uname -r), $(grep -m1 -o -w -E 'svm|vmx' /proc/cpuinfo || echo 'no svm/vmx')"
q_init=() q_ops=() l_init=() l_ops=()
for i in $(seq "$rounds"); do
	read -r qi qo <<<"$(qemu_round "$i")"
	read -r li lo <<<"$(lockvisor_round "$i")"
	printf 'round %s: qemu microvm %s s to init, %s ops/s; lockvisor %s s to init, %s ops/s\n' "$i" "$qi" "$qo" "$li" "$lo"
	q_init+=("$qi") q_ops+=("$qo") l_init+=("$li") l_ops+=("$lo")
done
[ -z "$keep" ] || { mkdir -p "$keep" && cp "$tmp"/*.log "$tmp"/*.json "$keep"/ 2>/dev/null || true; }
python3 - "${q_init[*]}" "${q_ops[*]}" "${l_init[*]}" "${l_ops[*]}" <<'PY'
import statistics, sys
def nums(text):
    return [float(x) for x in text.split() if x != "none"]
qi, qo, li, lo = (nums(a) for a in sys.argv[1:5])
def med(v):
    return statistics.median(v) if v else None
def show(name, q, l, unit, fmt):
    if q is None or l is None:
        print(f"median {name}: qemu {q}, lockvisor {l} (a VMM never got there)")
        return
    print(f"median {name}: qemu microvm {fmt % q} {unit}, lockvisor {fmt % l} {unit} (lockvisor/qemu {l / q:.2f})")
show("time to init", med(qi), med(li), "s", "%.2f")
show("throughput", med(qo), med(lo), "ops/s", "%.0f")
spread = lambda v: f"{min(v):.0f}..{max(v):.0f}" if v else "-"
print(f"throughput range: qemu {spread(qo)}, lockvisor {spread(lo)}")
PY
