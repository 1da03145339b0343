#!/usr/bin/env bash
# `cmake --install` into a temporary prefix, then the installed lockvisor with
# its source tree out of reach: a native lab writes its plots (the scripts
# found beside the binary), the script lookup goes on to the environment and
# names every place it looked, the man page renders and lists every command
# and option of the binary's help, and the bash completion completes.
source "$(dirname "$0")/install_test_common.sh"
prefix=$work/prefix
# `cmake --install` rewrites the build tree's install_manifest.txt, which is
# how a user who installed from this tree uninstalls (docs/install.md): the
# test puts back the list it found (or none), so running the suite after
# installing leaves that list naming the user's files, not this temporary prefix.
manifest=$build/install_manifest.txt
[ -e "$manifest" ] && cp -p "$manifest" "$work/manifest.found"
restore_manifest() {
  if [ -e "$work/manifest.found" ]; then cp -p "$work/manifest.found" "$manifest"; else rm -f "$manifest"; fi
}
trap 'restore_manifest; rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
restore_manifest
lv=$prefix/bin/lockvisor
[ "$(ls "$prefix/bin")" = lockvisor ] || fail "bin/ holds more than lockvisor: $(ls "$prefix/bin" | tr '\n' ' ')"

# A lab from the prefix: plots drawn by share/lockvisor/lab-plot.py.
without_source "$lv" lab --native --scenario "$work/scenario.toml" --out "$work/lab" > "$work/lab.log" 2>&1 ||
  fail "the lab failed: $(cat "$work/lab.log")"
grep -q "No plots" "$work/lab.log" && fail "the lab drew no plots: $(grep 'No plots' "$work/lab.log")"
check_plots "$work/lab"

# Without the installed scripts (and the source tree): one warning that
# names every place looked, in order, and no plots.
mv "$prefix/share/lockvisor" "$work/scripts"
rm "$work/lab"/*.png
without_source env -u LOCKVISOR_LAB_PLOT "$lv" lab report "$work/lab" > "$work/report.log" 2>&1 || true
looked="lab-plot.py is not in any of: $prefix/share/lockvisor/lab-plot.py, $src/tools/lab-plot.py, \$LOCKVISOR_LAB_PLOT (not set)"
grep -qF "$looked" "$work/report.log" || fail "the warning does not name every place looked: $(cat "$work/report.log")"
[ ! -e "$work/lab/tradeoff.png" ] || fail "plots without a script"
# ... and the environment's script when there is no other.
without_source env LOCKVISOR_LAB_PLOT="$work/scripts/lab-plot.py" "$lv" lab report "$work/lab" > "$work/env.log" 2>&1 ||
  fail "lab report with LOCKVISOR_LAB_PLOT failed: $(cat "$work/env.log")"
check_plots "$work/lab"
# The installed copy comes before the environment's.
mv "$work/scripts" "$prefix/share/lockvisor"
rm "$work/lab"/*.png
printf 'import sys\nsys.exit(9)\n' > "$work/broken-plot.py"
without_source env LOCKVISOR_LAB_PLOT="$work/broken-plot.py" "$lv" lab report "$work/lab" > "$work/order.log" 2>&1 ||
  fail "lab report failed: $(cat "$work/order.log")"
check_plots "$work/lab"

# The man page: found under the prefix, renders without a warning, and names
# every command and every option of every command's help.
[ "$(MANPATH="$prefix/share/man" man -w lockvisor)" = "$prefix/share/man/man1/lockvisor.1" ] ||
  fail "man does not find lockvisor(1) under $prefix/share/man"
LC_ALL=C MANWIDTH=200 man -l "$prefix/share/man/man1/lockvisor.1" 2> "$work/man.err" | col -b > "$work/man.txt"
[ ! -s "$work/man.err" ] || fail "man -l: $(cat "$work/man.err")"
grep -q '^NAME' "$work/man.txt" || fail "the rendered page has no NAME section"
check_help() {  # the command path $@: its options and subcommands are on the page
  local help word
  help=$("$lv" "$@" --help)
  [ $# -eq 0 ] || grep -qF "lockvisor $*" "$work/man.txt" || fail "the page has no section 'lockvisor $*'"
  # Every option but -h,--help, which the page's synopsis says once for all.
  for word in $(sed -n '/^Options:/,/^$/p' <<<"$help" | grep -oE -- '^  (-[A-Za-z],)?--?[A-Za-z0-9-]+' | tr ',' ' '); do
    [ "$word" != -h ] && [ "$word" != --help ] || continue
    grep -qE -- "(^|[ ,])$word([ ,]|$)" "$work/man.txt" || fail "'lockvisor $* $word' is not on the page"
  done
  for word in $(sed -n '/^Subcommands:/,/^$/p' <<<"$help" | awk 'NR > 1 && NF {print $1}'); do
    check_help "$@" "$word"
  done
}
check_help

# The bash completion, with the installed binary.
complete_words() {  # prints the completions of the last word of "$@"
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _lockvisor
    printf "%s\n" "${COMPREPLY[@]}"' sh "$prefix/share/bash-completion/completions/lockvisor" "$@"
}
[ "$(complete_words "$lv" "" | sort)" = "$("$lv" --help | sed -n '/^Subcommands:/,$p' | awk 'NR > 1 && NF {print $1}' | sort)" ] ||
  fail "the completion of a command is not the list of commands"
[ "$(complete_words "$lv" run --lock "" | sort)" = "$("$lv" locks | awk '{print $1}' | sort)" ] ||
  fail "the completion of --lock is not 'lockvisor locks'"
[ "$(complete_words "$lv" lab --preset "" | sort)" = "$("$lv" lab --list | awk '{print $1}' | sort)" ] ||
  fail "the completion of --preset is not 'lockvisor lab --list'"
# (Captured first: under pipefail, `grep -q` leaving before the completion has
# written its last candidate would fail the pipeline on SIGPIPE.)
grep -qx -- --backend <<<"$(complete_words "$lv" run --back)" || fail "run --back does not complete to --backend"
[ "$(complete_words "$lv" run --backend "" | sort | tr '\n' ' ')" = "kvm userspace " ] ||
  fail "run --backend does not complete to its values"
grep -qx lockbench <<<"$(complete_words "$lv" run -w lo)" || fail "run -w lo does not complete to lockbench"
[ -z "$(complete_words "$lv" run --vcpus "")" ] || fail "run --vcpus (a number) completes to something"
echo "install prefix: ok"
