#!/usr/bin/env bash
# The Debian package from `cpack -G DEB`: it depends on the Debian packages
# of every shared library lockvisor links, recommends matplotlib, its binary
# is stripped, and, unpacked anywhere with the source tree out of reach, its lockvisor starts
# (doctor) and its lab draws plots with the packaged script.
source "$(dirname "$0")/install_test_common.sh"
cpack --config "$build/CPackConfig.cmake" -G DEB -B "$work/package" > "$work/cpack.log" 2>&1 ||
  fail "cpack failed: $(cat "$work/cpack.log")"
debs=("$work"/package/lockvisor_*.deb)
[ ${#debs[@]} -eq 1 ] && [ -f "${debs[0]}" ] || fail "cpack made no lockvisor_*.deb: $(ls "$work/package")"
deb=${debs[0]}
dpkg-deb --info "$deb" > "$work/info"
[ "$(dpkg-deb --field "$deb" Package)" = lockvisor ] || fail "the package is not named lockvisor"
depends=$(dpkg-deb --field "$deb" Depends)
for library in $(objdump -p "$build/vmm/lockvisor" | awk '/NEEDED/ {print $2}'); do
  path=$(ldd "$build/vmm/lockvisor" | awk -v l="$library" '$1 == l {print $3}')
  owner=$(dpkg -S "$path" 2>/dev/null || dpkg -S "/usr$path") || fail "no Debian package has $path"
  package=${owner%%:*}
  # Named by the package or by a name it provides (libspdlog1.10 provides
  # libspdlog1.10-fmt9, the name its shlibs file gives).
  names=("$package" $(dpkg-query -W -f='${Provides}' "$package" | tr ',' '\n' | awk '{print $1}'))
  tr ',' '\n' <<<"$depends" | awk '{print $1}' | grep -qxF "${names[@]/#/--regexp=}" ||
    fail "Depends lacks $package ($library): $depends"
done
dpkg-deb --field "$deb" Recommends | grep -q python3-matplotlib || fail "python3-matplotlib is not recommended"

root=$work/root
dpkg-deb -x "$deb" "$root"
for f in usr/bin/lockvisor usr/share/lockvisor/lab-plot.py usr/share/lockvisor/trace-swimlane.py \
  usr/share/man/man1/lockvisor.1 usr/share/bash-completion/completions/lockvisor; do
  [ -f "$root/$f" ] || fail "the package has no /$f"
done
# Stripped (CPACK_STRIP_FILES): no symbol table, no debug info.
sections=$(readelf -SW "$root/usr/bin/lockvisor") || fail "readelf cannot read the packaged lockvisor"
grep -q ' \.text ' <<<"$sections" || fail "readelf listed no .text in the packaged lockvisor: $sections"
for section in .symtab .debug_info; do
  if grep -qF " $section " <<<"$sections"; then fail "the packaged lockvisor is not stripped: it has $section"; fi
done
# doctor runs (exit 6 where this host has no usable KVM).
set +e
without_source "$root/usr/bin/lockvisor" doctor > "$work/doctor.log" 2>&1
code=$?
set -e
{ [ "$code" -eq 0 ] || [ "$code" -eq 6 ]; } && grep -q KVM "$work/doctor.log" ||
  fail "the packaged lockvisor doctor: exit $code, $(cat "$work/doctor.log")"
without_source "$root/usr/bin/lockvisor" lab --native --scenario "$work/scenario.toml" --out "$work/lab" \
  > "$work/lab.log" 2>&1 || fail "the packaged lab failed: $(cat "$work/lab.log")"
grep -q "No plots" "$work/lab.log" && fail "the packaged lab drew no plots: $(grep 'No plots' "$work/lab.log")"
check_plots "$work/lab"
echo "install deb: ok"
