#!/usr/bin/env bash
# Boot a Linux kernel + initramfs (mkinitrd.sh) with QEMU/KVM and time it.
# Meant to run inside tools/nested-kvm/run.sh (hardware-style KVM), e.g.
#   tools/nested-kvm/run.sh --smp 2 --mem 3072 --timeout 400 -- \
#     tools/research/qemu-boot.sh --kernel K --smp 2 --append 'no-kvmclock'
# Console lines are printed with the wall time since QEMU started.  If the
# guest has not printed INIT-DONE after --timeout seconds, the QEMU monitor's
# view of the guest (LAPIC, registers, PIC) and the outer KVM's statistics
# are dumped before QEMU is killed.  Last line: RESULT key=value ...
set -uo pipefail
kernel='' initrd=/var/cache/lockvisor/linux-guest/initrd.gz smp=1 mem=256 cpu=host
machine=microvm,acpi=off append='' timeout=240 extra=() label='' trace=0
while [ $# -gt 0 ]; do
	case "$1" in
	--kernel) kernel=$2; shift 2 ;;
	--initrd) initrd=$2; shift 2 ;;
	--smp) smp=$2; shift 2 ;;
	--mem) mem=$2; shift 2 ;;
	--cpu) cpu=$2; shift 2 ;;
	--machine) machine=$2; shift 2 ;;
	--append) append=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	--label) label=$2; shift 2 ;;
	--trace) trace=1; shift ;;
	--) shift; extra=("$@"); break ;;
	*) echo "qemu-boot: unknown option $1" >&2; exit 2 ;;
	esac
done
[ -n "$kernel" ] || { echo "qemu-boot: --kernel needed" >&2; exit 2; }
tmp=$(mktemp -d)
mon="$tmp/mon.sock"
cmdline="console=ttyS0 reboot=t panic=-1 $append"
qemu=(qemu-system-x86_64 -accel kvm -M "$machine" -cpu "$cpu" -smp "$smp" -m "$mem"
	-kernel "$kernel" -initrd "$initrd" -append "$cmdline"
	-nodefaults -no-user-config -serial stdio -display none -no-reboot
	-monitor "unix:$mon,server=on,wait=off" "${extra[@]}")
echo "CONFIG label=$label cpu=$cpu machine=$machine smp=$smp extra=${extra[*]} cmdline=$cmdline"

hmp_raw() { # commands... ; prints the monitor's answers
	python3 - "$mon" "$@" <<'PY'
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(3)
def rd():
    b = b""
    try:
        while not b.endswith(b"(qemu) "):
            d = s.recv(65536)
            if not d: break
            b += d
    except Exception: pass
    return b.decode(errors="replace")
rd()
for c in sys.argv[2:]:
    s.sendall((c + "\n").encode()); out = rd()
    print("### " + c); print(out.replace("(qemu) ", "").replace("\r", ""))
PY
}
hmp() { hmp_raw "$@" | sed "s/\x1b\[[0-9;]*[A-Za-z]//g; s/\x1b\[K//g"
}
kvmstats() {
	mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug 2>/dev/null
	for d in /sys/kernel/debug/kvm/*-*/; do
		[ -d "$d" ] || continue
		echo "### outer KVM stats $d"
		for f in exits halt_exits halt_wakeup irq_injections irq_window_exits nmi_injections \
			req_event irq_exits hypercalls io_exits mmio_exits insn_emulation signal_exits \
			host_state_reload nested_run irq_window_exits pf_taken pf_fixed preemption_timer_exits; do
			[ -f "$d/$f" ] && printf '%s=%s ' "$f" "$(cat "$d/$f")"
		done
		echo
		for v in "$d"vcpu*; do
			[ -d "$v" ] || continue
			printf '%s: ' "${v##*/}"
			for f in tsc-offset tsc-scaling-ratio lapic_timer_advance_ns; do
				[ -f "$v/$f" ] && printf '%s=%s ' "$f" "$(cat "$v/$f")"
			done
			echo
		done
	done
}

: >"$tmp/console"
tr=/sys/kernel/tracing
if [ "$trace" = 1 ]; then
	# The outer KVM's view of every event it injects into the guest and every exit.
	mountpoint -q $tr || mount -t tracefs none $tr
	echo 0 >$tr/tracing_on; echo >$tr/trace; echo 8192 >$tr/buffer_size_kb
	for e in kvm_inj_virq kvm_inj_exception kvm_exit kvm_apic_accept_irq kvm_msr; do
		echo 1 >$tr/events/kvm/$e/enable
	done
	echo 1 >$tr/tracing_on
fi
t0=${EPOCHREALTIME/./}
"${qemu[@]}" </dev/null 2>"$tmp/qemu.err" >"$tmp/console" &
qpid=$!
result=timeout init_ms='' first_ms=''
last=0
deadline=$((t0 + timeout * 1000000))
while :; do
	now=${EPOCHREALTIME/./}
	# Print new console lines with their arrival time.
	n=$(wc -l <"$tmp/console")
	if [ "$n" -gt "$last" ]; then
		ms=$(((now - t0) / 1000))
		sed -n "$((last + 1)),${n}p" "$tmp/console" | tr -d '\r' | while IFS= read -r l; do
			printf '%7d.%03d| %s\n' $((ms / 1000)) $((ms % 1000)) "$l"
		done
		[ -n "$first_ms" ] || first_ms=$ms
		if [ -z "$init_ms" ] && sed -n "$((last + 1)),${n}p" "$tmp/console" | grep -q INIT-REACHED; then
			init_ms=$ms
		fi
		if sed -n "$((last + 1)),${n}p" "$tmp/console" | grep -q INIT-DONE; then
			result=init
		fi
		last=$n
	fi
	kill -0 "$qpid" 2>/dev/null || { [ "$result" = init ] || result=exited; break; }
	[ "$result" != init ] || { kvmstats; sleep 1; break; }
	if [ "$now" -ge "$deadline" ]; then
		hmp "info registers" "info lapic" "info pic" "info irq" "info kvm" 2>&1 | head -150
		kvmstats
		c=1
		while [ "$c" -lt "$smp" ]; do
			hmp "info cpus" "cpu $c" "info registers" "info lapic" "x /6i \$pc" 2>&1 | grep -E '^###|CPU|RIP|RSP|RAX|RBX|RCX|RDX|LVTT|Timer|IRR|ISR|^0x'
			c=$((c + 1))
		done
		for _ in 1 2 3 4 5; do hmp "info registers" 2>&1 | grep -E 'RIP'; sleep 0.5; done
		hmp "x /12i \$pc" "x /40gx \$esp" 2>&1 | sed 's/\x1b\[[0-9;]*[A-Za-z]//g' 
		kvmstats
		if [ "$trace" = 1 ]; then
			echo 0 >$tr/tracing_on
			if [ -n "${QEMU_BOOT_TRACE_OUT:-}" ]; then
				grep -v kvm_msr $tr/trace >"$QEMU_BOOT_TRACE_OUT"
				echo "### outer KVM trace saved in $QEMU_BOOT_TRACE_OUT"
			else
				echo "### outer KVM trace (last 120 events)"; tail -n 120 $tr/trace
			fi
		fi
		break
	fi
	sleep 0.2
done
end=${EPOCHREALTIME/./}
kill "$qpid" 2>/dev/null; sleep 0.5; kill -9 "$qpid" 2>/dev/null; wait "$qpid" 2>/dev/null
n=$(wc -l <"$tmp/console")
[ "$n" -le "$last" ] || sed -n "$((last + 1)),${n}p" "$tmp/console" | tr -d '\r' | sed 's/^/      end| /'
grep -v "^$" "$tmp/qemu.err" | head -5 | sed 's/^/qemu-stderr: /'
echo "RESULT label=$label result=$result init_ms=${init_ms:-none} total_ms=$(((end - t0) / 1000)) smp=$smp"
rm -rf "$tmp"
