#!/usr/bin/env bash
# Peer benchmark (not a test): the same Debian kernel booted by QEMU
# (-M microvm, tools/linux-guest/qemu-peer.sh) and by lockvisor, side by side
# in one session, N rounds alternating; prints one line per boot and the
# medians: wall time from starting the VMM to the guest's first userspace
# line. Run where Linux guests run (inside tools/nested-kvm with --smp 1):
#   tools/nested-kvm/run.sh --smp 1 --mem 3072 --timeout 1800 -- tools/linux-guest/peer-bench.sh
# Options: --kernel F (default: the amd64 kernel of fetch-kernels.sh)
#          --vcpus N (2) --rounds N (3) --lockvisor PATH
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
kernel=${LOCKVISOR_LINUX_KERNELS:-/var/cache/lockvisor/linux-kernels}/amd64
vcpus=2
rounds=3
lv=$here/../../build/default/vmm/lockvisor
while [ $# -gt 0 ]; do
	case "$1" in
	--kernel) kernel=$2; shift 2 ;;
	--vcpus) vcpus=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--lockvisor) lv=$2; shift 2 ;;
	*) echo "peer-bench: unknown option $1" >&2; exit 2 ;;
	esac
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lockvisor-peer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
initrd=$tmp/initrd.gz
"$here/mkinitrd.sh" "$initrd" >/dev/null
q=() l=()
for i in $(seq "$rounds"); do
	qj=$("$here/qemu-peer.sh" --kernel "$kernel" --initrd "$initrd" --smp "$vcpus" --mem 512 --timeout 600)
	qs=$(python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print(j["init_ms"] / 1000)' "$qj")
	"$lv" run --kernel "$kernel" --vcpus "$vcpus" --workload hello --json "$tmp/l.json" >"$tmp/l.log" 2>&1
	ls_=$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["linux"]["seconds_to_init"], 3))' "$tmp/l.json")
	echo "round $i: qemu microvm ${qs} s to init, lockvisor ${ls_} s to init"
	q+=("$qs") l+=("$ls_")
done
python3 - "${q[*]}" "${l[*]}" <<'PY'
import statistics, sys
q = [float(x) for x in sys.argv[1].split()]
l = [float(x) for x in sys.argv[2].split()]
print("median to init: qemu microvm %.1f s, lockvisor %.1f s (lockvisor/qemu %.2f)"
      % (statistics.median(q), statistics.median(l), statistics.median(l) / statistics.median(q)))
PY
