#!/usr/bin/env bash
# Fetch Debian 12's own x86-64 kernels for lockvisor's Linux-guest tests:
# the packages that linux-image-amd64 and linux-image-cloud-amd64 depend on,
# downloaded with `apt-get download` (not installed) and unpacked with
# `dpkg-deb -x`. Leaves, in the cache directory:
#   vmlinuz-<version>        the bzImage of each flavour
#   config-<version>         its build configuration
#   amd64 / cloud-amd64      symlinks to the newest vmlinuz of each flavour
# Idempotent: a kernel already unpacked is not fetched again.
#
# Usage: fetch-kernels.sh
# Environment:
#   LOCKVISOR_LINUX_KERNELS  cache directory (default /var/cache/lockvisor/linux-kernels)
set -euo pipefail

die() { printf 'fetch-kernels: error: %s\n' "$*" >&2; exit 1; }
note() { printf 'fetch-kernels: %s\n' "$*" >&2; }

cache="${LOCKVISOR_LINUX_KERNELS:-/var/cache/lockvisor/linux-kernels}"
for tool in apt-get apt-cache dpkg-deb; do
	command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found (needs a Debian-based host)"
done
mkdir -p "$cache" 2>/dev/null || die "cannot create $cache (set LOCKVISOR_LINUX_KERNELS to a writable directory)"
[ -w "$cache" ] || die "$cache is not writable (set LOCKVISOR_LINUX_KERNELS to a writable directory)"

exec 9>"$cache/.lock"
flock 9 || die "cannot lock $cache/.lock"

apt_opts=()
# As root, apt-get download would warn that the _apt sandbox user cannot write here.
[ "$(id -u)" = 0 ] && apt_opts+=(-o APT::Sandbox::User=root)

# The versioned package a meta-package depends on, e.g. linux-image-6.1.0-57-amd64.
versioned_pkg() { # $1 = meta-package
	apt-cache depends "$1" 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n1
}

for flavour in amd64 cloud-amd64; do
	pkg=$(versioned_pkg "linux-image-$flavour")
	[ -n "$pkg" ] || die "apt-cache does not know linux-image-$flavour (run apt-get update?)"
	version=${pkg#linux-image-}
	if [ ! -s "$cache/vmlinuz-$version" ]; then
		tmp=$(mktemp -d "$cache/tmp.XXXXXX")
		note "downloading $pkg"
		(cd "$tmp" && apt-get "${apt_opts[@]}" download "$pkg" >"$tmp/apt.log" 2>&1) ||
			{ cat "$tmp/apt.log" >&2; rm -rf "$tmp"; die "apt-get download $pkg failed"; }
		dpkg-deb -x "$tmp"/*.deb "$tmp/root"
		cp "$tmp/root/boot/vmlinuz-$version" "$cache/vmlinuz-$version.part"
		cp "$tmp/root/boot/config-$version" "$cache/config-$version"
		mv "$cache/vmlinuz-$version.part" "$cache/vmlinuz-$version"
		rm -rf "$tmp"
	fi
	ln -sfn "vmlinuz-$version" "$cache/$flavour"
	printf '%s\n' "$cache/vmlinuz-$version"
done
