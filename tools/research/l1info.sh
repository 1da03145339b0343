#!/bin/sh
# Facts about the nested machine (L1) that matter to its guests' clocks.
dmesg | grep -i -E 'tsc|clocksource|kvm|svm|hpet|apic timer|x2apic|lapic' | head -40
echo "L1 clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource) (available: $(cat /sys/devices/system/clocksource/clocksource0/available_clocksource))"
grep -m1 flags /proc/cpuinfo | tr ' ' '\n' | grep -E '^(tsc|constant_tsc|nonstop_tsc|tsc_scale|x2apic|tsc_deadline_timer|svm|npt|avic|vgif|v_vmsave_vmload|rdtscp|tsc_known_freq|hypervisor)$' | tr '\n' ' '; echo
for p in /sys/module/kvm/parameters/* /sys/module/kvm_amd/parameters/*; do printf '%s=%s ' "${p##*/}" "$(cat $p)"; done; echo
