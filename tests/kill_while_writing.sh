#!/usr/bin/env bash
# kill -9 at random moments while the suite writes its files leaves each of them one whole version:
# atomic_write_stress writes a checkpoint, an .npy and a RESULT JSON file round after round; this script
# SIGKILLs it 20-300 ms after it has written every file once, then checks each file (the checkpoint reads
# back with its checksum, the .npy has its full size and one round's values, the JSON parses and its sum
# matches its values). Repeated for TRIALS trials, every one must pass.
#
# usage: tests/kill_while_writing.sh ATOMIC_WRITE_STRESS [TRIALS]   (default 20)
set -uo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: tests/kill_while_writing.sh ATOMIC_WRITE_STRESS [TRIALS]" >&2
    exit 2
fi
program="$1"
trials="${2:-20}"
# Checked: seq of a word or of 0 gives no trial at all, and the test would pass having checked nothing.
if ! [[ "$trials" =~ ^[1-9][0-9]{0,3}$ ]]; then
    echo "kill_while_writing: TRIALS '$trials' is not an integer in 1..9999" >&2
    exit 2
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT  # a folder of our own, from mktemp

check_json() {
    python3 - "$1" <<'EOF'
import json, sys
with open(sys.argv[1]) as f:
    result = json.load(f)
values = result["values"]
expected = [result["round"] + k for k in range(len(values))]
if len(values) != 1000 or values != expected or sum(values) != result["sum"]:
    sys.exit("%s: the values are not one round's" % sys.argv[1])
EOF
}

failed=0
for trial in $(seq 1 "$trials"); do
    dir="$work/trial$trial"
    mkdir "$dir"
    "$program" write "$dir" >/dev/null &
    writer=$!
    for _ in $(seq 1 200); do
        [ -e "$dir/ready" ] || ! kill -0 "$writer" 2>/dev/null && break
        sleep 0.05
    done
    if [ ! -e "$dir/ready" ]; then
        echo "trial $trial: the writer did not write its first round" >&2
        kill -9 "$writer" 2>/dev/null
        exit 1
    fi
    delay_ms=$((20 + RANDOM % 281))
    sleep "$(printf '0.%03d' "$delay_ms")"
    kill -9 "$writer" 2>/dev/null
    wait "$writer" 2>/dev/null
    status=$?
    # The writer rewrites its files until killed: one that had ended would have left nothing to interrupt.
    if [ "$status" -ne $((128 + 9)) ]; then
        echo "trial $trial: the writer ended (exit $status) before it was killed: nothing was interrupted" >&2
        exit 1
    fi
    temporaries=$(find "$dir" -name '*.tmp.*' | wc -l)
    if "$program" check "$dir" && check_json "$dir/result.json"; then
        echo "trial $trial: killed after $delay_ms ms: every file whole ($temporaries stray temporary file(s))"
    else
        echo "trial $trial: killed after $delay_ms ms: a file is torn or damaged (above)" >&2
        failed=1
    fi
done
[ $failed -eq 0 ] && echo "all $trials trials: every file was a whole version after kill -9"
exit $failed
