#!/usr/bin/env bash
# Peer benchmark (not a test): boot a kernel + initramfs with QEMU/KVM
# (-M microvm) and report, as one JSON line on stdout, the wall time from
# starting QEMU to the guest's "INIT-REACHED" console line and the total run
# time.  Meant to run inside the nested AMD-V machine, side by side with
# lockvisor booting the same kernel:
#   tools/nested-kvm/run.sh --smp 2 --mem 3072 --timeout 900 -- \
#     tools/research/qemu-peer.sh --kernel vmlinuz --initrd initrd.gz --smp 2
# The initramfs's /init must print INIT-REACHED first and INIT-DONE when it
# is finished (tools/research/mkinitrd.sh builds one).
#
# Options: --kernel F (required) --initrd F --smp N (1) --mem MiB (256)
#   --append STR (extra kernel command line; default "quiet")
#   --machine SPEC (microvm,acpi=off,rtc=off,pit=off) --cpu SPEC (host)
#   --timeout SECS (600) --log FILE (console and diagnostics; default: none)
# Exit status: 0 if the guest reached init, 1 if not, 2 on bad usage.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
usage() { echo "qemu-peer: $*" >&2; exit 2; }
kernel='' initrd=/var/cache/lockvisor/linux-guest/initrd.gz smp=1 mem=256 append=quiet
machine=microvm,acpi=off,rtc=off,pit=off cpu=host timeout=600 log=/dev/null
while [ $# -gt 0 ]; do
	[ $# -ge 2 ] || usage "$1 needs a value"
	case "$1" in
	--kernel) kernel=$2 ;; --initrd) initrd=$2 ;; --smp) smp=$2 ;; --mem) mem=$2 ;;
	--append) append=$2 ;; --machine) machine=$2 ;; --cpu) cpu=$2 ;;
	--timeout) timeout=$2 ;; --log) log=$2 ;;
	*) usage "unknown option $1" ;;
	esac
	shift 2
done
[ -n "$kernel" ] || usage "--kernel is required"
[ -r "$kernel" ] || usage "cannot read kernel $kernel"
[ -r "$initrd" ] || usage "cannot read initrd $initrd"
for n in "$smp" "$mem" "$timeout"; do
	case "$n" in '' | *[!0-9]*) usage "--smp, --mem and --timeout need integers" ;; esac
done
[ -c /dev/kvm ] || usage "no /dev/kvm (run inside tools/nested-kvm/run.sh)"
# PVM's /dev/kvm cannot run an unmodified Linux kernel: hardware KVM only.
grep -qw -E 'svm|vmx' /proc/cpuinfo ||
	usage "/dev/kvm is not hardware KVM (no svm/vmx flag; PVM cannot run an unmodified Linux)"
# With two or more vCPUs in the nested machine, QEMU 7.2 TCG may deliver an
# injected interrupt twice (tools/nested-kvm/README.md): Linux then hangs.
# Multi-threaded TCG has no round-robin kick, and run.sh passes LOCKVISOR_* in.
if [ "$(nproc)" != 1 ] && [ "${LOCKVISOR_NESTED_TCG_THREAD:-single}" != multi ]; then
	echo "qemu-peer: warning: $(nproc) CPUs here; a Linux guest needs tools/nested-kvm/run.sh --smp 1 (or LOCKVISOR_NESTED_TCG_THREAD=multi)" >&2
fi
out=$("$here/qemu-boot.sh" --kernel "$kernel" --initrd "$initrd" --smp "$smp" --mem "$mem" \
	--append "$append" --machine "$machine" --cpu "$cpu" --timeout "$timeout" --label peer 2>&1 | tee "$log" |
	grep '^RESULT ' | tail -n 1) || true
val() { printf '%s\n' "$out" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
result=$(val result) init_ms=$(val init_ms) total_ms=$(val total_ms)
[ -n "$result" ] || result=error
case "$init_ms" in '' | none) init_json=null ;; *) init_json=$init_ms ;; esac
case "$total_ms" in '' ) total_json=null ;; *) total_json=$total_ms ;; esac
jstr() { local s=${1//\\/\\\\}; s=${s//\"/\\\"}; printf '"%s"' "$s"; }
printf '{"vmm":"qemu","kernel":%s,"smp":%s,"mem_mib":%s,"machine":%s,"cpu":%s,"append":%s,"result":%s,"init_ms":%s,"total_ms":%s}\n' \
	"$(jstr "$(basename "$kernel")")" "$smp" "$mem" "$(jstr "$machine")" "$(jstr "$cpu")" "$(jstr "$append")" \
	"$(jstr "$result")" "$init_json" "$total_json"
[ "$init_json" != null ]
