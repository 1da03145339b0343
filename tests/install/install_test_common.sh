# Shared by the install tests: a tiny native lab (a few seconds, no KVM),
# running a command with the source tree out of reach, and checks of a lab's
# plots. Sourced; $1 of the test is the build tree, $2 the source tree.
set -euo pipefail
build=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# Plots need Debian's /usr/bin/python3 with matplotlib (tools/install-deps.sh):
# without it this test is skipped (exit 77), a failure under CI=true.
if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  [ "${CI:-}" = true ] && fail "no matplotlib for /usr/bin/python3 under CI=true"
  echo "SKIP: /usr/bin/python3 has no matplotlib (python3-matplotlib)"
  exit 77
fi

# --native: each lock also runs on host threads (the guest twins fail
# without KVM and draw nothing; the native points are enough for plots).
cat > "$work/scenario.toml" <<'TOML'
name = "install-test"
repeats = 2
[fixed]
workload = "lockbench"
duration_s = 0.02
pcpus = "0"
[[axis]]
name = "lock"
values = ["ticket", "tas"]
TOML

# Runs "$@" in a mount namespace of its own where the source tree (and the
# build tree inside it) is an empty tmpfs: what the command finds, it found
# elsewhere. Root mounts directly; another user maps itself to root in a
# user namespace first (Debian allows that by default).
without_source() {
  local as_root=()
  [ "$(id -u)" -eq 0 ] || as_root=(--map-root-user)
  unshare "${as_root[@]}" --mount -- sh -c '
    mount -t tmpfs lockvisor-source-hidden "$1" || exit 1
    [ ! -e "$1/tools/lab-plot.py" ] || { echo "the source tree is still there" >&2; exit 1; }
    shift
    exec "$@"' sh "$src" "$@"
}

# The plots of lab directory $1 are there and are PNG files.
check_plots() {
  local png
  for png in tradeoff throughput latency fairness cpu; do
    [ -s "$1/$png.png" ] || fail "no $png.png in $1"
    [ "$(head -c 4 "$1/$png.png" | tail -c 3)" = PNG ] || fail "$1/$png.png is not a PNG file"
  done
}
