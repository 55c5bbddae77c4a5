#!/usr/bin/env bash
# A program refused to touch data it did not make: it exits with the expected code, says why on stderr,
# and leaves the data byte for byte as it was.
#
# usage: tests/data_safety_checks.sh checkpoint STRESS CODE TEXT COMMAND...
#            @DIR@ in COMMAND: a fresh folder holding a checkpoint (written by STRESS, atomic_write_stress)
#        tests/data_safety_checks.sh user-runs CODE TEXT COMMAND...
#            @DIR@ in COMMAND: a fresh folder whose runs/ holds a file of the user's
#        tests/data_safety_checks.sh runs-file CODE TEXT COMMAND...
#            @DIR@ in COMMAND: a fresh folder where runs is a file of the user's, not a folder
#        tests/data_safety_checks.sh user-file CODE TEXT COMMAND...
#            @DIR@ in COMMAND: a fresh folder holding kept.json, a file of the user's
#        tests/data_safety_checks.sh user-link CODE TEXT COMMAND...
#            @DIR@ in COMMAND: a fresh folder holding kept.json, a file of the user's, and link.json, a
#            symbolic link to it, which must still be one afterwards
#        tests/data_safety_checks.sh fifo CODE TEXT COMMAND...
#            @DIR@ in COMMAND: a fresh folder holding fifo, a named pipe, which must still be one afterwards
#        tests/data_safety_checks.sh empty-out CODE TEXT COMMAND...
#            @DIR@ in COMMAND: a fresh, empty folder, which must still hold no file afterwards
#        tests/data_safety_checks.sh scratch CODE TEXT COMMAND...
#            @DIR@ in COMMAND: a fresh, empty folder of the test's own (no other test's leftovers), which
#            the command may write into
# TEXT: a |-list of texts stderr must each contain.
set -uo pipefail
kind="$1"
shift
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT  # a folder of our own, from mktemp
dir="$work/dir"
mkdir "$dir"
case "$kind" in
    checkpoint) "$1" once "$dir" >/dev/null || exit 1; kept="$dir/checkpoint.fwi"; shift ;;
    user-runs) mkdir "$dir/runs"; kept="$dir/runs/notes.txt"; echo "the user's notes $RANDOM" >"$kept" ;;
    runs-file) kept="$dir/runs"; echo "the user's file $RANDOM" >"$kept" ;;
    user-file) kept="$dir/kept.json"; echo "the user's results $RANDOM" >"$kept" ;;
    user-link) kept="$dir/kept.json"; echo "the user's results $RANDOM" >"$kept"; ln -s kept.json "$dir/link.json" ;;
    fifo) kept="$dir/fifo"; mkfifo "$kept" ;;
    empty-out | scratch) kept="" ;;
    *) echo "data_safety_checks: unknown kind '$kind'" >&2; exit 2 ;;
esac
code="$1" texts="$2"
shift 2
[ -z "$kept" ] || [ "$kind" = fifo ] || cp "$kept" "$work/original"
command=()
for word in "$@"; do command+=("${word//@DIR@/$dir}"); done

# A refusal comes at once: a command still running after 60 s hangs (on the FIFO, say), and fails.
timeout --kill-after=10 60 "${command[@]}" >"$work/stdout" 2>"$work/stderr"
status=$?
cat "$work/stderr"
failed=0
[ "$status" -eq "$code" ] || { echo "FAIL: exit $status, expected $code" >&2; failed=1; }
IFS='|' read -r -a wanted <<<"$texts"
for text in "${wanted[@]}"; do
    grep -qF -e "$text" "$work/stderr" || { echo "FAIL: stderr does not mention '$text'" >&2; failed=1; }
done
if [ "$kind" = scratch ]; then
    :  # nothing was there to keep
elif [ "$kind" = fifo ]; then
    [ -p "$kept" ] || { echo "FAIL: $kept is no longer a FIFO" >&2; failed=1; }
elif [ -n "$kept" ]; then
    cmp "$work/original" "$kept" || { echo "FAIL: $kept changed" >&2; failed=1; }
    [ "$kind" != user-link ] || [ -L "$dir/link.json" ] ||
        { echo "FAIL: $dir/link.json is no longer a symbolic link" >&2; failed=1; }
else
    written="$(find "$dir" -mindepth 1)"
    [ -z "$written" ] || { echo "FAIL: the refused run wrote into @DIR@: $written" >&2; failed=1; }
    kept="@DIR@ (empty)"
fi
[ $failed -eq 0 ] && echo "PASS: exit $status${kept:+, $kept unchanged}"
exit $failed
