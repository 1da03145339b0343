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
