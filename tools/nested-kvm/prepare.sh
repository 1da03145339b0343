#!/usr/bin/env bash
# Prepare the parts of the nested-KVM runner (see README.md in this directory):
# a Debian kernel (vmlinux + the modules for KVM/AMD-V, virtio, 9p, overlay) and a
# static busybox, packed into a base initramfs.  Idempotent: when the cache is
# already prepared this is a fast no-op.  On success, prints the directory that
# holds kernel, initrd-base.gz, busybox and info on stdout.
#
# Usage: prepare.sh [--refresh]
#   --refresh   resolve the kernel package again even if a kernel is cached.
# Environment:
#   LOCKVISOR_NESTED_CACHE       cache directory
#                                (default /var/cache/lockvisor/nested-kvm)
#   LOCKVISOR_NESTED_KERNEL_PKG  kernel package to use (default: the one that
#                                linux-image-amd64 depends on)
set -euo pipefail

# Bump when the layout or the contents of a prepared directory change.
readonly FORMAT=3
# Modules the guest needs; their dependencies are resolved from .modinfo.
readonly ROOT_MODULES="kvm_amd virtio_pci 9pnet_virtio 9p overlay"

die() { printf 'nested-kvm prepare: error: %s\n' "$*" >&2; exit 1; }
note() { printf 'nested-kvm prepare: %s\n' "$*" >&2; }

refresh=0
for arg in "$@"; do
	case "$arg" in
	--refresh) refresh=1 ;;
	-h | --help) sed -n '2,14s/^# \{0,1\}//p' "$0"; exit 0 ;;
	*) die "unknown argument '$arg' (usage: prepare.sh [--refresh])" ;;
	esac
done

cache="${LOCKVISOR_NESTED_CACHE:-/var/cache/lockvisor/nested-kvm}"

is_prepared() { # $1 = directory
	[ -f "$1/stamp" ] && [ "$(cat "$1/stamp")" = "format=$FORMAT" ] &&
		[ -s "$1/kernel" ] && [ -s "$1/initrd-base.gz" ] && [ -x "$1/busybox" ]
}

current_dir() {
	local name
	[ -f "$cache/current" ] || return 1
	name=$(cat "$cache/current")
	[ -n "$name" ] && is_prepared "$cache/$name" || return 1
	printf '%s\n' "$cache/$name"
}

# Fast path, no lock needed: prepared directories never change once stamped.
if [ "$refresh" = 0 ] && current_dir; then
	exit 0
fi

mkdir -p "$cache" 2>/dev/null ||
	die "cannot create cache directory $cache (set LOCKVISOR_NESTED_CACHE to a writable directory)"
[ -w "$cache" ] ||
	die "cache directory $cache is not writable (set LOCKVISOR_NESTED_CACHE to a writable directory)"

exec 9>"$cache/.lock"
flock 9 || die "cannot lock $cache/.lock"
# Another process may have prepared it while we waited for the lock.
if [ "$refresh" = 0 ] && current_dir; then
	exit 0
fi

for tool in apt-get apt-cache dpkg-deb gzip; do
	command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found (needs a Debian-based host)"
done

tmp=$(mktemp -d "$cache/tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
log="$tmp/apt.log"

apt_opts=()
# As root, apt-get download falls back to an unsandboxed download with a warning
# when the _apt user cannot write to the target directory; ask for it directly.
[ "$(id -u)" = 0 ] && apt_opts+=(-o APT::Sandbox::User=root)

kernel_pkg_from_meta() {
	apt-cache show --no-all-versions linux-image-amd64 2>/dev/null |
		sed -n 's/^Depends:.*\(linux-image-[0-9][^ ,]*\).*/\1/p' | head -n 1
}

apt_updated=0
apt_update() {
	[ "$apt_updated" = 0 ] || return 1
	apt_updated=1
	note "running apt-get update"
	apt-get "${apt_opts[@]}" update >>"$log" 2>&1 ||
		die "apt-get update failed: $(tail -n 1 "$log")"
}

pkg="${LOCKVISOR_NESTED_KERNEL_PKG:-}"
if [ -z "$pkg" ]; then
	pkg=$(kernel_pkg_from_meta)
	if [ -z "$pkg" ]; then
		apt_update || true
		pkg=$(kernel_pkg_from_meta)
	fi
	[ -n "$pkg" ] || die "cannot resolve the kernel package that linux-image-amd64 depends on"
fi

download() { # packages...
	(cd "$tmp" && apt-get "${apt_opts[@]}" download "$@") >>"$log" 2>&1
}
note "downloading $pkg and busybox-static"
if ! download "$pkg" busybox-static; then
	apt_update || true
	download "$pkg" busybox-static ||
		die "apt-get download $pkg busybox-static failed: $(grep -E '^(E|W):' "$log" | tail -n 1)"
fi

kdeb=$(find "$tmp" -maxdepth 1 -name "${pkg}_*.deb" | head -n 1)
bdeb=$(find "$tmp" -maxdepth 1 -name 'busybox-static_*.deb' | head -n 1)
[ -n "$kdeb" ] || die "downloaded kernel package for $pkg not found"
[ -n "$bdeb" ] || die "downloaded busybox-static package not found"
kpkgver=$(dpkg-deb -f "$kdeb" Version)

note "unpacking $(basename "$kdeb")"
dpkg-deb -x "$kdeb" "$tmp/k" || die "dpkg-deb -x $kdeb failed"
dpkg-deb -x "$bdeb" "$tmp/bb" || die "dpkg-deb -x $bdeb failed"

# Debian kernels ship modules under /lib/modules or (merged /usr) /usr/lib/modules.
moddirs=("$tmp"/k/lib/modules/* "$tmp"/k/usr/lib/modules/*)
kver=
for d in "${moddirs[@]}"; do
	if [ -d "$d/kernel" ]; then
		[ -z "$kver" ] || die "more than one kernel in $pkg"
		kver=$(basename "$d")
		moddir=$d
	fi
done
[ -n "$kver" ] || die "no /lib/modules/<version>/kernel directory in $pkg"
vmlinuz="$tmp/k/boot/vmlinuz-$kver"
[ -s "$vmlinuz" ] || die "no boot/vmlinuz-$kver in $pkg"
busybox="$tmp/bb/bin/busybox"
[ -x "$busybox" ] || die "no bin/busybox in busybox-static"

name="${kver}_${kpkgver}"
out="$tmp/out"
mkdir -p "$out/rd/bin" "$out/rd/lib/modules"

# Index every module file by its normalized name (dashes -> underscores).
declare -A modpath=()
while IFS= read -r -d '' f; do
	b=${f##*/}
	b=${b%%.ko*}
	modpath[${b//-/_}]=$f
done < <(find "$moddir" -name '*.ko' -print0 -o -name '*.ko.*' -print0)
[ "${#modpath[@]}" -gt 0 ] || die "no kernel modules found in $moddir"

declare -A builtin=()
if [ -f "$moddir/modules.builtin" ]; then
	while IFS= read -r line; do
		b=${line##*/}
		b=${b%%.ko*}
		builtin[${b//-/_}]=1
	done <"$moddir/modules.builtin"
fi

module_depends() { # $1 = uncompressed .ko file; prints the comma-separated depends
	if command -v modinfo >/dev/null 2>&1 && modinfo --version 2>/dev/null | grep -q kmod; then
		modinfo -F depends "$1"
	else
		# .modinfo holds NUL-separated key=value strings.
		tr '\0' '\n' <"$1" | sed -n 's/^depends=//p' | head -n 1
	fi
}

decompress() { # $1 = module file, $2 = output .ko
	case "$1" in
	*.ko) cp "$1" "$2" ;;
	*.ko.xz) xz -dc "$1" >"$2" 2>/dev/null || "$busybox" xz -dc "$1" >"$2" ;;
	*.ko.gz) gzip -dc "$1" >"$2" ;;
	*.ko.zst) command -v zstd >/dev/null 2>&1 || die "zstd needed to decompress $1"
		zstd -q -dc "$1" >"$2" ;;
	*) die "unknown module compression: $1" ;;
	esac || die "cannot decompress $1"
}

declare -A state=() # visiting | done
order=()
resolve() { # $1 = normalized module name
	local m=$1 f deps d
	case "${state[$m]:-}" in
	done) return 0 ;;
	visiting) die "module dependency cycle at $m" ;;
	esac
	if [ -z "${modpath[$m]:-}" ]; then
		[ -n "${builtin[$m]:-}" ] && { state[$m]="done"; return 0; }
		die "module $m not found in $pkg"
	fi
	state[$m]=visiting
	f="$out/rd/lib/modules/$m.ko"
	decompress "${modpath[$m]}" "$f"
	deps=$(module_depends "$f")
	for d in ${deps//,/ }; do
		resolve "${d//-/_}"
	done
	state[$m]="done"
	order+=("$m")
}
for m in $ROOT_MODULES; do
	resolve "$m"
done
printf '%s.ko\n' "${order[@]}" >"$out/rd/modules.load"

cp "$busybox" "$out/rd/bin/busybox"
cp "$busybox" "$out/busybox"

# Booting the uncompressed ELF vmlinux through its PVH entry point skips the
# bzImage self-decompression, which takes ~3 s under TCG.  Fall back to the
# bzImage when the kernel has no PVH entry or the payload cannot be extracted.
extract_vmlinux() { # $1 = bzImage, $2 = output
	local magic off
	for magic in '\xfd7zXZ\x00' '\x28\xb5\x2f\xfd' '\x1f\x8b\x08'; do
		off=$(LC_ALL=C grep -aboP -m 1 "$magic" "$1" 2>/dev/null | head -n 1 | cut -d: -f1) || true
		[ -n "$off" ] || continue
		case "$magic" in
		*7zXZ*) tail -c "+$((off + 1))" "$1" | xz -dc --single-stream >"$2" 2>/dev/null ;;
		*b5*) tail -c "+$((off + 1))" "$1" | zstd -q -dc >"$2" 2>/dev/null ;;
		*) tail -c "+$((off + 1))" "$1" | gzip -dc >"$2" 2>/dev/null ;;
		esac
		# Trailing data after the stream can make the decompressor fail: check the result.
		[ "$(head -c 4 "$2" | od -An -tx1 | tr -d ' ')" = 7f454c46 ] &&
			[ "$(wc -c <"$2")" -gt 4000000 ] && return 0
	done
	return 1
}
boot=bzimage
if grep -q '^CONFIG_PVH=y' "$tmp/k/boot/config-$kver" 2>/dev/null &&
	extract_vmlinux "$vmlinuz" "$out/kernel"; then
	boot=pvh
else
	cp "$vmlinuz" "$out/kernel"
fi
(cd "$out/rd" && find . | LC_ALL=C sort | "$busybox" cpio -o -H newc 2>/dev/null) |
	gzip -6 >"$out/initrd-base.gz" || die "cannot build the base initramfs"
rm -rf "$out/rd"

{
	printf 'kernel_version=%s\n' "$kver"
	printf 'boot=%s\n' "$boot"
	printf 'kernel_package=%s\n' "$pkg"
	printf 'kernel_package_version=%s\n' "$kpkgver"
	printf 'busybox_version=%s\n' "$(dpkg-deb -f "$bdeb" Version)"
	printf 'modules=%s\n' "${order[*]}"
} >"$out/info"
printf 'format=%s\n' "$FORMAT" >"$out/stamp"

# An identical kernel may already be prepared (--refresh): keep it, runs may use it.
if ! is_prepared "$cache/$name"; then
	rm -rf "${cache:?}/$name"
	mv "$out" "$cache/$name"
fi
printf '%s\n' "$name" >"$tmp/current"
mv "$tmp/current" "$cache/current"
note "prepared kernel $kver ($pkg $kpkgver, boot=$boot): modules ${order[*]}"
printf '%s\n' "$cache/$name"
