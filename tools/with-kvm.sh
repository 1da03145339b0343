#!/usr/bin/env bash
# Runs a command where /dev/kvm works: directly when this host has a usable
# /dev/kvm, otherwise inside tools/nested-kvm (Linux KVM in an emulated AMD-V
# machine; slower, but real KVM). Prints which one it chose.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
  echo "with-kvm: using this host's /dev/kvm" >&2
  exec "$@"
fi
echo "with-kvm: no usable /dev/kvm here; running inside tools/nested-kvm (emulated AMD-V, real KVM)" >&2
"$here/nested-kvm/prepare.sh" >&2
exec "$here/nested-kvm/run.sh" --smp 2 --timeout "${LOCKVISOR_NESTED_TIMEOUT:-3000}" -- "$@"
