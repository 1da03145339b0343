#!/usr/bin/env bash
# Prepare the parts of the nested RISC-V runner (see README.md in this
# directory): a riscv64 Linux kernel with KVM built in, compiled from Debian's
# linux-source-6.1 with the configuration fragment kernel.config, and the
# machine's static riscv64 /init (init.cpp).  Each is cached under a key of
# its inputs (the kernel: the linux-source-6.1 package version and the
# fragment's hash; init: the hash of its sources and of this script), so a
# second call is a fast no-op.
# On success prints two lines on stdout: the kernel Image and the init binary.
#
# Usage: prepare.sh
# Environment:
#   LOCKVISOR_NESTED_RISCV_CACHE  cache directory
#                                 (default /var/cache/lockvisor/nested-riscv)
#   LOCKVISOR_NESTED_RISCV_JOBS   make -j for the kernel build (default 2)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
readonly SOURCE_PKG=linux-source-6.1
readonly SOURCE_TAR=/usr/src/linux-source-6.1.tar.xz
readonly CROSS=riscv64-linux-gnu-

die() { printf 'nested-riscv prepare: error: %s\n' "$*" >&2; exit 1; }
note() { printf 'nested-riscv prepare: %s\n' "$*" >&2; }

for arg in "$@"; do
	case "$arg" in
	-h | --help) sed -n '2,15s/^# \{0,1\}//p' "$0"; exit 0 ;;
	*) die "unknown argument '$arg' (usage: prepare.sh)" ;;
	esac
done

cache="${LOCKVISOR_NESTED_RISCV_CACHE:-/var/cache/lockvisor/nested-riscv}"
jobs="${LOCKVISOR_NESTED_RISCV_JOBS:-2}"
case "$jobs" in '' | *[!0-9]* | 0) die "LOCKVISOR_NESTED_RISCV_JOBS must be a positive integer" ;; esac

hash_of() { sha256sum "$@" | cut -c1-16; }
srcver=$(dpkg-query -W -f '${Version}' "$SOURCE_PKG" 2>/dev/null) || srcver=
{ [ -n "$srcver" ] && [ -r "$SOURCE_TAR" ]; } ||
	die "$SOURCE_TAR not found (apt-get install $SOURCE_PKG)"
kdir="$cache/linux-${srcver}_$(hash_of "$here/kernel.config")"
# init shares the Linux guest init's PID 1 helpers (guest/linux).
init_sources=("$here/init.cpp" "$root/guest/linux/pid1.cpp")
init_inputs=("${init_sources[@]}" "$root/guest/linux/pid1.h" "$root/guest/linux/unique_fd.h" "$0")
idir="$cache/init_$(cat "${init_inputs[@]}" | hash_of -)"

# A cache entry is complete once its stamp exists; it never changes after.
prepared() { [ -f "$kdir/stamp" ] && [ -f "$idir/stamp" ]; }
print_paths() { printf '%s\n%s\n' "$kdir/Image" "$idir/init"; }

if prepared; then
	print_paths
	exit 0
fi

mkdir -p "$cache" 2>/dev/null ||
	die "cannot create cache directory $cache (set LOCKVISOR_NESTED_RISCV_CACHE to a writable directory)"
[ -w "$cache" ] ||
	die "cache directory $cache is not writable (set LOCKVISOR_NESTED_RISCV_CACHE to a writable directory)"
exec 9>"$cache/.lock"
flock 9 || die "cannot lock $cache/.lock"
# Another process may have prepared it while we waited for the lock.
if prepared; then
	print_paths
	exit 0
fi

for tool in "${CROSS}gcc" "${CROSS}g++" make flex bison bc xz; do
	command -v "$tool" >/dev/null 2>&1 ||
		die "'$tool' not found (tools/install-deps.sh installs the nested RISC-V machine's packages)"
done

tmp=$(mktemp -d "$cache/tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

if [ ! -f "$kdir/stamp" ]; then
	started=$(date +%s)
	note "building the riscv64 kernel ($SOURCE_PKG $srcver, $(basename "$kdir")) with make -j$jobs; 5 to 15 minutes on 2 CPUs"
	tar -xf "$SOURCE_TAR" -C "$tmp" || die "cannot extract $SOURCE_TAR"
	src="$tmp/linux-source-6.1"
	obj="$tmp/obj"
	mkdir "$obj"
	# tinyconfig is allnoconfig with these two fragments; ours goes on top, so
	# that anything it does not name stays off.
	cat "$src/kernel/configs/tiny-base.config" "$src/kernel/configs/tiny.config" \
		"$here/kernel.config" >"$tmp/all.config"
	kmake() { nice -n 10 make -C "$src" O="$obj" ARCH=riscv CROSS_COMPILE="$CROSS" "$@"; }
	kmake KCONFIG_ALLCONFIG="$tmp/all.config" allnoconfig >"$tmp/build.log" 2>&1 ||
		{ tail -n 20 "$tmp/build.log" >&2; die "kernel configuration failed"; }
	missing=$(grep -E '^CONFIG_[A-Za-z0-9_]+=' "$here/kernel.config" | while IFS= read -r line; do
		grep -qxF "$line" "$obj/.config" || printf ' %s' "$line"
	done)
	[ -z "$missing" ] || die "kernel.config options lost in the final configuration (a dependency is missing):$missing"
	kmake -j"$jobs" Image >>"$tmp/build.log" 2>&1 ||
		{ tail -n 30 "$tmp/build.log" >&2; die "kernel build failed"; }
	mkdir "$tmp/kernel"
	cp "$obj/arch/riscv/boot/Image" "$tmp/kernel/Image"
	cp "$obj/.config" "$tmp/kernel/config"
	seconds=$(($(date +%s) - started))
	{
		printf 'source_package=%s %s\n' "$SOURCE_PKG" "$srcver"
		printf 'fragment_sha256=%s\n' "$(sha256sum "$here/kernel.config" | cut -d' ' -f1)"
		printf 'build_seconds=%s\n' "$seconds"
		printf 'make_jobs=%s\n' "$jobs"
	} >"$tmp/kernel/info"
	: >"$tmp/kernel/stamp"
	rm -rf "$kdir" "$src" "$obj"
	mv "$tmp/kernel" "$kdir"
	note "kernel built in ${seconds}s: $kdir/Image"
fi

if [ ! -f "$idir/stamp" ]; then
	mkdir "$tmp/init"
	"${CROSS}g++" -std=c++20 -O2 -static -Wall -Wextra -Werror -I"$root" -o "$tmp/init/init" \
		"${init_sources[@]}" ||
		die "cannot build init.cpp"
	"${CROSS}strip" "$tmp/init/init"
	: >"$tmp/init/stamp"
	rm -rf "$idir"
	mv "$tmp/init" "$idir"
fi
print_paths
