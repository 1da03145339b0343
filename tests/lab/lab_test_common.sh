# Shared by the lab's command-line tests: a small native scenario (no KVM
# needed, ~20 ms per point) and helpers. Sourced; $1 of the test is lockvisor.
set -euo pipefail
LOCKVISOR=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat > "$work/scenario.toml" <<'TOML'
name = "lab-test"
repeats = 5
[fixed]
workload = "lockbench"
duration_s = 0.02
native = true
pcpus = "0"
[[axis]]
name = "vcpus"
values = [1, 2]
[[axis]]
name = "lock"
values = ["ticket", "tas"]
TOML

fail() { echo "FAIL: $*" >&2; exit 1; }

# The sorted point ids of a results.jsonl, one per line.
ids_of() { /usr/bin/python3 -c 'import json,sys
for line in open(sys.argv[1]): print(json.loads(line)["id"])' "$1" | sort; }

# The sorted ids of the whole matrix, from --dry-run.
matrix_ids() { "$LOCKVISOR" lab --scenario "$work/scenario.toml" --dry-run | awk '/#r/ {print $1}' | sort; }

# A test of guest points needs /dev/kvm: skipped (exit 77) without it, a
# failure under CI=true.
require_kvm() {
  if [ ! -r /dev/kvm ] || [ ! -w /dev/kvm ]; then
    [ "${CI:-}" = true ] && fail "no usable /dev/kvm under CI=true"
    echo "SKIP: no usable /dev/kvm"
    exit 77
  fi
}

# A guest scenario in $work/NAME.toml: lockbench, 0.1 s per run, 4 vCPUs on
# CPU 0 (4:1), REPEATS runs per point, axis lock = the remaining arguments;
# more TOML (e.g. a [timeline] table) from stdin when it is not a terminal.
guest_scenario() {
  local name=$1 repeats=$2
  shift 2
  local locks
  locks=$(printf '"%s", ' "$@")
  {
    printf 'name = "%s"\nrepeats = %s\n[fixed]\nworkload = "lockbench"\nduration_s = 0.1\nvcpus = 4\npcpus = "0"\n' \
      "$name" "$repeats"
    printf '[[axis]]\nname = "lock"\nvalues = [%s]\n' "${locks%, }"
    [ -t 0 ] || cat
  } > "$work/$name.toml"
}
